"""Chain definitions: every built-in loads, errors name the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexmatch.chains import (
    CHAIN_KINDS,
    Chain,
    ChainContext,
    Chunker,
    MatchingTextChain,
    QueryTransform,
    build_chain,
    load_spec,
    register,
    registered,
)
from flexmatch.config import ChainRef
from flexmatch.engine.chains.kinds import KIND_BASES
from flexmatch.errors import ConfigError, PromptError
from flexmatch.resources import builtin_dir

BUILTIN_CHAINS = sorted(p.stem for p in builtin_dir("chains").glob("*.yaml"))


def test_there_are_builtin_chains_of_every_kind() -> None:
    assert len(BUILTIN_CHAINS) >= 14
    assert {load_spec(name, None).kind for name in BUILTIN_CHAINS} == set(CHAIN_KINDS)


@pytest.mark.parametrize("name", BUILTIN_CHAINS)
def test_builtin_chain_validates_and_builds(name: str) -> None:
    spec = load_spec(name, None)
    assert spec.kind in CHAIN_KINDS and spec.name == name
    kind = KIND_BASES[spec.kind]
    chain = build_chain(ChainRef(chain=name), kind, ChainContext(llm=_dummy_llm()))
    assert isinstance(chain, kind) and chain.spec.type == spec.type


@pytest.mark.parametrize("name", BUILTIN_CHAINS)
def test_builtin_chain_spec_round_trips(name: str, tmp_path: Path) -> None:
    """load → dump → load gives the same spec."""
    spec = load_spec(name, None, env={})
    _write_chain(tmp_path, name, spec.dump())
    again = load_spec(name, tmp_path, env={})
    assert again.path == str(tmp_path / "chains" / f"{name}.yaml")
    assert again.model_copy(update={"path": spec.path}) == spec


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
    chain = build_chain(ChainRef(chain="questions"), MatchingTextChain, context)
    assert chain.spec.name == "sentences"
    assert context.notices == [
        "no LLM configured: matching_text uses 'sentences' instead of 'questions'"
    ]


def test_kind_mismatch_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"none\.yaml: field 'kind'.*reranker chain.*chunker"):
        build_chain(ChainRef(chain="none"), Chunker, ChainContext())


def test_unknown_chain_name_lists_available() -> None:
    with pytest.raises(ConfigError, match=r"no chain named 'nope'.*available:.*structure"):
        build_chain(ChainRef(chain="nope"), Chunker, ChainContext())


def _write_chain(kb: Path, name: str, text: str) -> None:
    (kb / "chains").mkdir(parents=True, exist_ok=True)
    (kb / "chains" / f"{name}.yaml").write_text(text, encoding="utf-8")


def test_unknown_type_names_file_and_field(tmp_path: Path) -> None:
    _write_chain(tmp_path, "mine", "kind: chunker\ntype: magic\n")
    with pytest.raises(
        ConfigError, match=r"mine\.yaml: field 'type': no chunker chain type 'magic'"
    ):
        build_chain(ChainRef(chain="mine"), Chunker, ChainContext(kb_dir=tmp_path))


def test_unknown_param_names_file_and_field(tmp_path: Path) -> None:
    _write_chain(tmp_path, "mine", "kind: chunker\ntype: window\nparams:\n  max_tokenz: 3\n")
    with pytest.raises(ConfigError, match=r"mine\.yaml: params: field 'max_tokenz': unknown field"):
        build_chain(ChainRef(chain="mine"), Chunker, ChainContext(kb_dir=tmp_path))


def test_unknown_top_level_field(tmp_path: Path) -> None:
    _write_chain(tmp_path, "mine", "kind: chunker\ntype: window\npromt: x.j2\n")
    with pytest.raises(ConfigError, match=r"mine\.yaml: field 'promt': unknown field"):
        load_spec("mine", tmp_path)


def test_param_overrides_from_config_are_validated(tmp_path: Path) -> None:
    ref = ChainRef(chain="window", params={"max_tokens": 30, "overlap_tokens": 40})
    with pytest.raises(ConfigError, match="overlap_tokens must be smaller"):
        build_chain(ref, Chunker, ChainContext())


def test_kb_folder_overrides_builtin_by_file_name(tmp_path: Path) -> None:
    _write_chain(
        tmp_path,
        "structure",
        "kind: chunker\ntype: window\nparams: {max_tokens: 25, overlap_tokens: 5}\n",
    )
    chain = build_chain(ChainRef(chain="structure"), Chunker, ChainContext(kb_dir=tmp_path))
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
            MatchingTextChain,
            ChainContext(kb_dir=tmp_path, llm=_dummy_llm()),
        )


def test_a_registered_custom_type_is_usable_from_yaml(tmp_path: Path) -> None:
    @register("query_transform", "shout_test")
    class Shout(QueryTransform):
        async def run(self, query: str) -> list[str]:
            return [query.upper()]

    _write_chain(tmp_path, "loud", "kind: query_transform\ntype: shout_test\n")
    chain = build_chain(ChainRef(chain="loud"), QueryTransform, ChainContext(kb_dir=tmp_path))
    assert isinstance(chain, Shout)
    assert "shout_test" in registered()["query_transform"]


def _dummy_llm():  # an LLM object that is never called in these tests
    from flexmatch.engine.llm import LLM

    return LLM("openai/unused", api_base="http://127.0.0.1:9/v1")


def test_entry_point_plugins_register_like_builtins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real installed distribution (dist-info on sys.path) with a flexmatch.chains entry point."""
    from flexmatch.engine.chains import registry

    (tmp_path / "fm_plugin_demo.py").write_text(
        "from flexmatch.chains import QueryTransform, register\n"
        "@register('query_transform', 'plugin_echo')\n"
        "class Echo(QueryTransform):\n"
        "    async def run(self, query):\n"
        "        return [query, query]\n"
    )
    info = tmp_path / "fm_plugin_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fm-plugin-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[flexmatch.chains]\necho = fm_plugin_demo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    assert "plugin_echo" in registered()["query_transform"]


def test_a_chain_class_must_subclass_its_kind() -> None:
    with pytest.raises(TypeError, match="must subclass QueryTransform"):

        @register("query_transform", "not_a_transform")
        class Wrong(Chain):
            pass
