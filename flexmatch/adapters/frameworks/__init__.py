"""FlexMatch inside agent frameworks: LangChain, LlamaIndex and the OpenAI Agents SDK.

One module per framework, each behind an extra of the same name; each takes a local
``KnowledgeBase`` or a remote ``Client`` alike (``common.Searchable``)::

    from flexmatch.adapters.frameworks.langchain import FlexMatchRetriever, retriever_tool
    from flexmatch.adapters.frameworks.llamaindex import FlexMatchRetriever, retriever_tool
    from flexmatch.adapters.frameworks.openai_agents import search_tool

Every result carries the same metadata in the framework's own place for it
(``common.result_metadata``): chunk and document ids, source, uri, title, heading path,
location and citation, score, matched text.
"""
