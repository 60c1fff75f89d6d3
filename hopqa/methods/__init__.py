"""Methods, one module each, registered by name (see ``hopqa.methods.base``)."""

from hopqa.methods import (  # noqa: F401  (registration)
    cot,
    direct,
    gensco,
    genread,
    hgot,
    ircot,
    iter_retgen,
    react,
    retrieve_read,
    self_ask,
    self_dc,
)
from hopqa.methods.base import (
    METHODS,
    Method,
    MethodConfig,
    MethodError,
    Result,
    build_method,
    get_method_class,
)

__all__ = ["METHODS", "Method", "MethodConfig", "MethodError", "Result", "build_method", "get_method_class"]
