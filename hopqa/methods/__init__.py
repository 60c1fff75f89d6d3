"""Methods, one module each, registered by name (see ``hopqa.methods.base``)."""

from hopqa.methods import cot, direct, genread, retrieve_read  # noqa: F401  (registration)
from hopqa.methods.base import METHODS, Method, MethodConfig, MethodError, Result, build_method, get_method_class

__all__ = ["METHODS", "Method", "MethodConfig", "MethodError", "Result", "build_method", "get_method_class"]
