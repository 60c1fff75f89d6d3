"""hopqa.config: credentials never leave a URL that is recorded or printed."""

import pytest

from hopqa.config import redact_credentials


@pytest.mark.parametrize("text,expected", [
    ("openai:m@http://user:secret@host:8000/v1", "openai:m@http://***@host:8000/v1"),
    ("openai:m@https://token@host/v1?timeout=3", "openai:m@https://***@host/v1?timeout=3"),
    ("openai:m@http://u:p@ss@host/v1", "openai:m@http://***@host/v1"),  # '@' inside the password
    ("a http://a:b@c/d and https://e:f@g/h", "a http://***@c/d and https://***@g/h"),
    ("openai:m@http://host/v1", "openai:m@http://host/v1"),  # the model's own '@' is not a credential
    ("http://host/v1?q=a@b", "http://host/v1?q=a@b"),  # '@' after the host is not a credential
    ("embedded:qwen2.5-1.5b", "embedded:qwen2.5-1.5b"),
])
def test_redact_credentials(text, expected):
    assert redact_credentials(text) == expected
