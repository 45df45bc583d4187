"""``headings``: no LLM; the title, the section's heading path and the document's lead."""

from __future__ import annotations

from flexmatch.engine.chains.kinds import QualifyingTextChain
from flexmatch.engine.chains.variables import document_lead, heading_label
from flexmatch.models import Document, Section


class Headings(QualifyingTextChain):
    """No LLM: the document title, the section's heading path and the document's lead."""

    async def run(self, section: Section, document: Document) -> str:
        label = heading_label(document, section)
        lead = document_lead(document)  # once per document, not once per chunk
        parts = [f"From {label}." if label else ""]
        if lead and lead not in section.text[: len(lead) + 5]:
            parts.append(f"The document begins: {lead}")
        return " ".join(part for part in parts if part)
