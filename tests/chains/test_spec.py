"""Chain definitions: every built-in loads, errors name the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexmatch.chains import CHAIN_KINDS, ChainContext, build_chain, load_spec, registered
from flexmatch.chains.base import Chain, register
from flexmatch.config import ChainRef
from flexmatch.errors import ConfigError, PromptError
from flexmatch.resources import builtin_dir


def test_every_builtin_chain_file_validates_and_builds() -> None:
    files = sorted(builtin_dir("chains").glob("*.yaml"))
    assert len(files) >= 14
    llm_context = ChainContext(llm=_dummy_llm())
    for path in files:
        spec = load_spec(path.stem, None)
        assert spec.kind in CHAIN_KINDS and spec.name == path.stem
        chain = build_chain(ChainRef(chain=path.stem), spec.kind, llm_context)
        assert chain.spec.type == spec.type


def test_registered_types_cover_the_issue() -> None:
    types = registered()
    assert {"structure", "window"} <= set(types["chunker"])
    assert {"llm_questions", "sentences", "content"} <= set(types["matching_text"])
    assert {"llm_context", "headings"} <= set(types["qualifying_text"])
    assert {"llm_question", "identity"} <= set(types["query_transform"])
    assert {"cohere", "llm", "none"} <= set(types["reranker"])
    assert {"json", "markdown"} <= set(types["result_formatter"])


def test_llm_chain_falls_back_without_llm_and_says_so() -> None:
    context = ChainContext()
    chain = build_chain(ChainRef(chain="questions"), "matching_text", context)
    assert chain.spec.name == "sentences"
    assert context.notices == [
        "no LLM configured: matching_text uses 'sentences' instead of 'questions'"
    ]


def test_kind_mismatch_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"none\.yaml: field 'kind'.*reranker chain.*chunker"):
        build_chain(ChainRef(chain="none"), "chunker", ChainContext())


def test_unknown_chain_name_lists_available() -> None:
    with pytest.raises(ConfigError, match=r"no chain named 'nope'.*available:.*structure"):
        build_chain(ChainRef(chain="nope"), "chunker", ChainContext())


def _write_chain(kb: Path, name: str, text: str) -> None:
    (kb / "chains").mkdir(parents=True, exist_ok=True)
    (kb / "chains" / f"{name}.yaml").write_text(text, encoding="utf-8")


def test_unknown_type_names_file_and_field(tmp_path: Path) -> None:
    _write_chain(tmp_path, "mine", "kind: chunker\ntype: magic\n")
    with pytest.raises(
        ConfigError, match=r"mine\.yaml: field 'type': no chunker chain type 'magic'"
    ):
        build_chain(ChainRef(chain="mine"), "chunker", ChainContext(kb_dir=tmp_path))


def test_unknown_param_names_file_and_field(tmp_path: Path) -> None:
    _write_chain(tmp_path, "mine", "kind: chunker\ntype: window\nparams:\n  max_tokenz: 3\n")
    with pytest.raises(ConfigError, match=r"mine\.yaml: params: field 'max_tokenz': unknown field"):
        build_chain(ChainRef(chain="mine"), "chunker", ChainContext(kb_dir=tmp_path))


def test_unknown_top_level_field(tmp_path: Path) -> None:
    _write_chain(tmp_path, "mine", "kind: chunker\ntype: window\npromt: x.j2\n")
    with pytest.raises(ConfigError, match=r"mine\.yaml: field 'promt': unknown field"):
        load_spec("mine", tmp_path)


def test_param_overrides_from_config_are_validated(tmp_path: Path) -> None:
    ref = ChainRef(chain="window", params={"max_tokens": 30, "overlap_tokens": 40})
    with pytest.raises(ConfigError, match="overlap_tokens must be smaller"):
        build_chain(ref, "chunker", ChainContext())


def test_kb_folder_overrides_builtin_by_file_name(tmp_path: Path) -> None:
    _write_chain(
        tmp_path,
        "structure",
        "kind: chunker\ntype: window\nparams: {max_tokens: 25, overlap_tokens: 5}\n",
    )
    chain = build_chain(ChainRef(chain="structure"), "chunker", ChainContext(kb_dir=tmp_path))
    assert chain.spec.type == "window" and chain.params.max_tokens == 25
    assert chain.spec.path == str(tmp_path / "chains" / "structure.yaml")


def test_kb_prompt_override_and_strict_variables(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "questions.j2").write_text("Q {{ chunk.text }} {{ whatever }}")
    with pytest.raises(
        PromptError, match=r"questions\.j2: unknown template variable\(s\) whatever"
    ):
        build_chain(
            ChainRef(chain="questions"),
            "matching_text",
            ChainContext(kb_dir=tmp_path, llm=_dummy_llm()),
        )


def test_a_registered_custom_type_is_usable_from_yaml(tmp_path: Path) -> None:
    @register("query_transform", "shout_test")
    class Shout(Chain):
        async def run(self, query: str) -> list[str]:
            return [query.upper()]

    _write_chain(tmp_path, "loud", "kind: query_transform\ntype: shout_test\n")
    chain = build_chain(ChainRef(chain="loud"), "query_transform", ChainContext(kb_dir=tmp_path))
    assert isinstance(chain, Shout)
    assert "shout_test" in registered()["query_transform"]


def _dummy_llm():  # an LLM object that is never called in these tests
    from flexmatch.llm import LLM

    return LLM("openai/unused", api_base="http://127.0.0.1:9/v1")


def test_entry_point_plugins_register_like_builtins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real installed distribution (dist-info on sys.path) with a flexmatch.chains entry point."""
    from flexmatch.chains import base

    (tmp_path / "fm_plugin_demo.py").write_text(
        "from flexmatch.chains.base import Chain, register\n"
        "@register('query_transform', 'plugin_echo')\n"
        "class Echo(Chain):\n"
        "    async def run(self, query):\n"
        "        return [query, query]\n"
    )
    info = tmp_path / "fm_plugin_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fm-plugin-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[flexmatch.chains]\necho = fm_plugin_demo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(base, "_plugins_loaded", False)
    assert "plugin_echo" in registered()["query_transform"]
