"""Multipart uploads whose part headers may be long (a file name of thousands of characters).

python-multipart refuses any part header line over 4,224 bytes, and Starlette turns that
into a 400 for the whole request: one file with a 5,000-character name lost every file
of its batch. Routes built with ``UploadRoute`` (the API's document routes, the console)
parse forms with the header cap raised to ``MAX_PART_HEADER_BYTES``, so such a file
arrives with its name and is stored under a shortened one (``safe_filename``) while the
rest of the batch goes on. The body's own size limit still bounds the whole request.
"""

from __future__ import annotations

import codecs
import inspect
from collections.abc import Callable, Coroutine
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException, MultiPartParser

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

MAX_PART_HEADER_BYTES = 64 * 1024
"""The longest header line of one part (python-multipart's default: 4,224 bytes)."""
# versions before the cap existed take no such argument (and have no cap to raise)
_HEADER_CAP = (
    {"max_header_size": MAX_PART_HEADER_BYTES}
    if "max_header_size" in inspect.signature(MultipartParser).parameters
    else {}
)


class _LongHeaderParser(MultiPartParser):
    """Starlette's multipart parser (its callbacks, limits and temporary files), fed by a
    python-multipart parser that takes part header lines up to ``MAX_PART_HEADER_BYTES``."""

    async def parse(self) -> FormData:
        _, params = parse_options_header(self.headers["Content-Type"])
        charset = params.get(b"charset", "utf-8")
        if isinstance(charset, bytes):
            charset = charset.decode("latin-1")
        try:
            self._charset = codecs.lookup(charset).name
        except LookupError:
            self._charset = "latin-1"
        boundary = params.get(b"boundary")
        if boundary is None:
            raise MultiPartException("Missing boundary in multipart.")
        callbacks: MultipartCallbacks = {
            "on_part_begin": self.on_part_begin,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
            "on_header_field": self.on_header_field,
            "on_header_value": self.on_header_value,
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_end": self.on_end,
        }
        try:
            parser = MultipartParser(boundary, callbacks, **_HEADER_CAP)
            async for chunk in self.stream:
                parser.write(chunk)
                # file data is written here, in a thread, not in the parser's callbacks
                for part, data in self._file_parts_to_write:
                    assert part.file is not None
                    await part.file.write(data)
                for part in self._file_parts_to_finish:
                    assert part.file is not None
                    await part.file.seek(0)
                self._file_parts_to_write.clear()
                self._file_parts_to_finish.clear()
            parser.finalize()
        except BaseException as exc:
            for file in self._files_to_close_on_error:
                file.close()
            if isinstance(exc, FormParserError):
                raise MultiPartException("Invalid multipart data.") from exc
            raise
        return FormData(self.items)


class LongHeaderRequest(Request):
    """A request whose multipart form is read by ``_LongHeaderParser``."""

    async def _get_form(self, **limits: Any) -> FormData:
        content_type, _ = parse_options_header(self.headers.get("Content-Type"))
        if self._form is None and content_type == b"multipart/form-data":
            try:
                async with aclosing(self.stream()) as stream:
                    self._form = await _LongHeaderParser(self.headers, stream, **limits).parse()
            except MultiPartException as exc:
                raise HTTPException(status_code=400, detail=exc.message) from exc
        return await super()._get_form(**limits)


def long_header_request(request: Request) -> Request:
    """``request`` as a ``LongHeaderRequest`` (the same scope and body stream)."""
    if isinstance(request, LongHeaderRequest):
        return request
    return LongHeaderRequest(request.scope, request.receive)


class UploadRoute(APIRoute):
    """A route whose forms may carry long part headers (see the module's docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(long_header_request(request))

        return handle
