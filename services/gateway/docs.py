"""`/docs`: Swagger UI over the served OpenAPI document, from assets shipped in a Python package.

The assets come from the PyPI package ``swagger-ui-py`` (Swagger UI 5.x, which renders OpenAPI 3.1; the
``swagger-ui-bundle`` package still ships 4.x, which does not), served by the gateway itself: clusters are
often offline, so the page loads nothing from a CDN. Only the three files the page uses are served.
"""

from __future__ import annotations

from pathlib import Path

import swagger_ui
from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from services.gateway.errors import ApiError

__all__ = ["ASSETS", "docs_router"]

ASSETS = Path(swagger_ui.__file__).resolve().parent / "static"
_SERVED = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


def docs_router(title: str) -> APIRouter:
    """The page and its assets (not part of the API's OpenAPI document)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/docs")
    async def page() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{title} — API docs",
            swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon-32x32.png",
            swagger_ui_parameters={"tryItOutEnabled": False, "displayRequestDuration": True},
        )

    @router.get("/docs/assets/{name}")
    async def asset(name: str) -> FileResponse:
        media_type = _SERVED.get(name)
        if media_type is None:
            raise ApiError(404, f"no such asset '{name}'")
        return FileResponse(ASSETS / name, media_type=media_type, headers={"Cache-Control": "max-age=86400"})

    return router
