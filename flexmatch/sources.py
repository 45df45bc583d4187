"""The plug-in surface for source-type authors: subclass ``SourceType``, list the items,
fetch one.

    from flexmatch.sources import Document, Element, ItemRef, SourceType

    class Notes(SourceType):
        def list_items(self, inputs):
            for path in sorted(Path(inputs[0]).glob("*.note")):
                version = str(path.stat().st_mtime_ns)  # unchanged: not fetched again
                yield ItemRef(id=path.stem, uri=path.as_uri(), version=version, data=path)

        def fetch(self, ref):
            return Document(id=ref.id, uri=ref.uri, source=self.context.name, title=ref.id,
                            elements=[Element(kind="paragraph", text=ref.data.read_text())])

A package makes its type available to every knowledge base through the
``flexmatch.sources`` entry-point group (``notes = "my_package:Notes"``), the way the
built-in ``files``, ``web`` and ``records`` register; ``register("notes")`` registers one
in-process.
"""

from flexmatch.inputs.sources.types import (
    ItemRef,
    SourceContext,
    SourceType,
    WebPage,
    register,
    registered,
)
from flexmatch.models import Document, Element, FailedDocument

__all__ = [
    "Document",
    "Element",
    "FailedDocument",
    "ItemRef",
    "SourceContext",
    "SourceType",
    "WebPage",
    "register",
    "registered",
]
