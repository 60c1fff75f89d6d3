"""Methods, one module each, registered by name (see ``hopqa.methods.base``)."""

from hopqa.methods import cot, direct, genread, ircot, iter_retgen, react, retrieve_read, self_ask  # noqa: F401
from hopqa.methods.base import METHODS, Method, MethodConfig, MethodError, Result, build_method, get_method_class

__all__ = ["METHODS", "Method", "MethodConfig", "MethodError", "Result", "build_method", "get_method_class"]
