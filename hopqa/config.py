"""Where hopqa keeps its files, and the few defaults shared by the CLI and the Python API.

``home`` (``--home``, or the ``HOPQA_HOME`` environment variable, default ``~/.cache/hopqa``)
holds the assembled embedded models (``models/``), the LLM response cache (``cache/llm``), the
demo corpus with its BM25 index (``demo/``) and downloaded official dataset releases
(``datasets/``). ``HOPQA_DATA_DIR`` names a benchmark data directory searched before those
downloads and the subsets shipped in ``hopqa/data`` (see ``hopqa.datasets.paths``).
Environment variables are read here and in the CLI only, never deep inside methods, backends
or the dataset loaders.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

#: hopqa's version (``hopqa.__version__``; kept equal to pyproject.toml's). Here, at the bottom
#: layer, so that modules below the package root (an index's metadata) can record it.
VERSION = "0.1.0"
#: The user-facing default model (the only packaged model that follows the prompts).
DEFAULT_LLM = "embedded:qwen2.5-1.5b"
#: The method of ``hopqa ask`` and ``hopqa.pipeline()``: IRCoT measured best of the decomposition
#: methods with the embedded Qwen on the shipped dev sets (docs/benchmarks/demo-method.md).
DEFAULT_METHOD = "ircot"
#: The small, fast model the tests use.
TEST_LLM = "embedded:smollm2-135m"
#: Longest question accepted, in characters (longer input is an error, not a silent cut).
MAX_QUESTION_CHARS = 4000


#: The words an on/off option accepts (``--set``, ``embedded:...?logits_all=1``, ``openai:...?logprobs=0``),
#: compared lower-case: the one list every option parser uses.
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")

#: The environment variable naming a benchmark data directory (read only by ``data_dir_from_env``).
DATA_DIR_ENV = "HOPQA_DATA_DIR"


def default_home(explicit: str | Path | None = None, create: bool = True) -> Path:
    """The hopqa home directory: ``explicit``, else ``$HOPQA_HOME``, else ``~/.cache/hopqa``.

    Created if missing unless ``create`` is False (for callers that only look inside it).
    """
    home = Path(explicit or os.environ.get("HOPQA_HOME") or Path.home() / ".cache" / "hopqa").expanduser()
    if create:
        home.mkdir(parents=True, exist_ok=True)
    return home


def data_dir_from_env() -> Path | None:
    """The data directory ``$HOPQA_DATA_DIR`` names, or None when it is unset or blank.

    Returned even if it does not exist, so that the loader's error can name it.
    """
    value = os.environ.get(DATA_DIR_ENV, "").strip()
    return Path(value).expanduser() if value else None


def default_llm(explicit: str | None = None) -> str:
    """The LLM spec to use: the argument, else ``HOPQA_LLM``, else the embedded Qwen."""
    return explicit or os.environ.get("HOPQA_LLM") or DEFAULT_LLM


def llm_from_env() -> str | None:
    """The LLM spec ``$HOPQA_LLM`` names, or None."""
    return os.environ.get("HOPQA_LLM") or None


def judge_from_env() -> str | None:
    """The judge LLM spec ``$HOPQA_JUDGE`` names (the evaluation's Acc metric), or None."""
    return os.environ.get("HOPQA_JUDGE") or None


def openai_api_key() -> str | None:
    """The key for OpenAI-compatible servers: ``$OPENAI_API_KEY`` (the one place it is read)."""
    return os.environ.get("OPENAI_API_KEY") or None


def service_api_key() -> str | None:
    """The key every ``/v1`` request to ``hopqa serve`` must carry: ``$HOPQA_API_KEY`` (``--api-key``
    wins over it), or None."""
    return os.environ.get("HOPQA_API_KEY") or None


def milvus_token() -> str | None:
    """The token (``user:password`` or an API key) for a Milvus server: ``$MILVUS_TOKEN``."""
    return os.environ.get("MILVUS_TOKEN") or None


#: A UTF-16 surrogate code point: never valid alone in text (a lone one cannot be encoded as
#: UTF-8; ``json.loads('"\\ud800"')`` makes one from a reply of a server that cut broken UTF-8).
SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so that it encodes as UTF-8
    (``text`` itself, unchanged, when it has none: the common case costs one search)."""
    return SURROGATE.sub("\ufffd", text) if SURROGATE.search(text) else text


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Replace ``path`` by ``data`` (``str`` as UTF-8, a lone surrogate as U+FFFD) so a reader
    or a kill at any moment sees either the old content or the new one, never a mix or an empty
    file (``atomic_file``)."""
    raw = valid_text(data).encode("utf-8") if isinstance(data, str) else data
    with atomic_file(path) as f:
        f.write(raw)


@contextmanager
def atomic_file(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write the new content of ``path`` into, in the block; it replaces
    ``path`` when the block ends, so that a reader or a kill at any moment sees either the old
    content or the new one, never a mix or an empty file.

    The data goes to a new hidden file in the same directory, is flushed and ``fsync``-ed, then
    renamed over ``path`` (``os.replace``, atomic on POSIX); the directory is synced so that the
    rename itself survives a power cut. The temporary file is removed if anything fails.
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # permissions as umask says
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_dir(target.parent)


def _sync_dir(directory: Path) -> None:
    """``fsync`` a directory (makes a rename in it durable); a no-op where unsupported."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


#: ``scheme://user:password@`` (or ``scheme://token@``) in a URL: the credentials part.
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s?#]+@")
#: ``name=value`` after ``?``, ``&``, ``;`` or ``#`` (a query or fragment parameter); the value
#: ends at the next separator, white space or quote.
_PARAMETER = re.compile(r"(?P<head>[?&;#](?P<name>[^=&;#?\s'\"<>]+)=)(?P<value>[^&;#\s'\"<>]+)")
#: Parameter names (percent-decoded, any case) that carry a credential: a key, token, secret,
#: password, signature, credential or session, alone or as the last part of the name
#: (``api_key``, ``apikey``, ``access_token``, ``client_secret``, ``X-Amz-Signature``, ...).
_CREDENTIAL_NAME = re.compile(
    r"(?:^|[_.-])(?:auth|authorization|sig|signature|credentials?|pwd|passwd|session(?:[_.-]?id)?|jwt)$"
    r"|(?:key|token|secret|password)$",
    re.IGNORECASE,
)


def _redact_parameter(match: re.Match[str]) -> str:
    from urllib.parse import unquote_plus

    if _CREDENTIAL_NAME.search(unquote_plus(match["name"])):
        return match["head"] + "***"
    return match[0]


def redact_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``: the user and
    password before the host, and the value of every query (or fragment) parameter whose name
    says it holds a credential (``_CREDENTIAL_NAME``: ``api_key``, ``token``, ``sig``, ...).

    ``openai:m@http://user:secret@host/v1`` -> ``openai:m@http://***@host/v1``;
    ``http://host/v1?api_key=sk-1&timeout=3`` -> ``http://host/v1?api_key=***&timeout=3``.
    Applied to every LLM spec or endpoint that is recorded (run configuration, results, cache
    keys) or printed.
    """
    return _PARAMETER.sub(_redact_parameter, _URL_CREDENTIALS.sub(r"\g<scheme>***@", text))


#: The credential of an ``Authorization``-like header, written as a header, a JSON field or a
#: parameter: everything after the name up to the end of the value (``Bearer sk-1`` whole).
_HEADER_VALUE = re.compile(
    r"(?i)(?<![\w-])(?P<head>(?:proxy-)?authorization|x-api-key|api-key)(?P<sep>[\"']?\s*[:=]\s*[\"']?)"
    r"(?!\*\*\*)(?P<value>[^\"'\r\n,;}&]+)")
#: An authorization scheme and its credential: ``Bearer <token>``, ``Basic <base64>``.
_SCHEME_TOKEN = re.compile(r"(?i)\b(?P<scheme>bearer|basic)\s+(?!\*\*\*)[A-Za-z0-9._~+/-]+=*")
#: An OpenAI-style secret key (``sk-...``, ``sk-proj-...``, ``sk-ant-...``).
_SECRET_KEY = re.compile(r"(?<![\w-])sk-[A-Za-z0-9_-]{6,}")
#: ``name=value`` or ``"name": "value"`` anywhere in a text (not only in a URL's query): the
#: value of every name ``_CREDENTIAL_NAME`` says is a credential is redacted.
_NAMED_VALUE = re.compile(
    r"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*)(?P<sep>[\"']?\s*[=:]\s*[\"']?)(?!\*\*\*)(?P<value>[^\s\"'&,;}<>)\]]+)")
#: Literal secrets shorter than this are not searched for in text (a two-letter password would
#: blank every occurrence of two letters); their encoded forms are long enough.
MIN_SECRET_CHARS = 4


def _redact_named(match: re.Match[str]) -> str:
    if _CREDENTIAL_NAME.search(match["name"]):
        return f"{match['name']}{match['sep']}***"
    return match[0]


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The secrets of a URL's ``user:password@`` part in every form they may be echoed in: the
    password (as written and percent-decoded), a lone user part (a token), and ``user:password``
    in base64 (the HTTP Basic credential a client makes of them, with and without padding)."""
    import base64
    from urllib.parse import unquote, urlsplit

    if not url:
        return ()
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return ()
    if user is None and password is None:
        return ()
    forms: list[str] = []
    if password:
        forms += [password, unquote(password)]
    elif user:
        forms += [user, unquote(user)]
    pair = f"{unquote(user or '')}:{unquote(password or '')}".encode()
    for encoded in (base64.b64encode(pair).decode(), base64.urlsafe_b64encode(pair).decode()):
        forms += [encoded, encoded.rstrip("=")]
    return tuple(dict.fromkeys(forms))


def secret_forms(url: str | None = None, api_key: str | None = None) -> tuple[str, ...]:
    """What ``redact_secrets`` must remove besides the usual shapes, for a backend reached at
    ``url`` with ``api_key``: the key (as is and in base64) and the URL's credentials
    (``url_secrets``), longest first, none shorter than ``MIN_SECRET_CHARS``."""
    import base64

    forms = list(url_secrets(url))
    if api_key:
        encoded = base64.b64encode(api_key.encode()).decode()
        forms += [api_key, encoded, encoded.rstrip("=")]
    return tuple(sorted({f for f in forms if len(f) >= MIN_SECRET_CHARS}, key=len, reverse=True))


def redact_secrets(text: str, extra: tuple[str, ...] | list[str] = ()) -> str:
    """``text`` (a backend's error message, a reply hopqa relays) with every credential-shaped
    token replaced by ``***``: the credentials of URLs (``redact_credentials``), each literal
    secret of ``extra`` (``secret_forms``: the configured key, a URL's password, their base64),
    the value of an ``Authorization`` / ``X-Api-Key`` header, ``Bearer <token>`` and ``Basic
    <base64>``, ``sk-...`` keys, and ``name=value`` / ``"name": "value"`` where the name says
    it is a credential (``key``, ``api_key``, ``token``, ``password``, ...).

    ``Incorrect API key provided: Bearer sk-abc123def`` -> ``Incorrect API key provided: Bearer ***``.
    """
    text = redact_credentials(text)
    for secret in sorted((s for s in extra if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True):
        text = text.replace(secret, "***")
    text = _HEADER_VALUE.sub(r"\g<head>\g<sep>***", text)
    text = _SCHEME_TOKEN.sub(r"\g<scheme> ***", text)
    text = _SECRET_KEY.sub("sk-***", text)
    return _NAMED_VALUE.sub(_redact_named, text)


def without_url_credentials(url: str) -> str:
    """``url`` without its ``user:password@`` part (``http://u:p@host/v1`` -> ``http://host/v1``)."""
    return _URL_CREDENTIALS.sub(r"\g<scheme>", url, count=1)
