"""hopqa over HTTP: ``hopqa serve`` runs ``create_app(ServiceSettings(...))`` with uvicorn.

A client of the methods like the CLI (it builds them through ``hopqa.build``). Modules:
``settings`` (what the service runs with), ``app`` (the FastAPI application: routes, the API
key, the body limit, errors), ``service`` (admit, build, answer, each with the request's
deadline), ``jobs`` (a request checked, then run in a worker thread, its trace reported live),
``admission`` (the bounded queue in front of the model), ``catalog`` (the methods, their papers
and options), ``runs`` (the evaluation runs, read-only, confined to their directory),
``openai_compat`` (``/v1/models``, ``/v1/chat/completions``), ``schemas`` (request and answer
shapes); ``static/`` holds the web page.

    from hopqa.server import ServiceSettings, create_app
    app = create_app(ServiceSettings(llm=llm, retriever_for=lambda kind: retriever))
"""

from __future__ import annotations

from hopqa.server.app import create_app
from hopqa.server.settings import RetrieverCache, ServiceSettings

__all__ = ["RetrieverCache", "ServiceSettings", "create_app"]
