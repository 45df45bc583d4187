"""Chain definitions: every built-in loads, errors name the file and the field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flexmatch import plugins
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
    assert {"questions", "sentences", "content"} <= set(types["matching_text"])
    assert {"context", "headings"} <= set(types["qualifying_text"])
    assert {"rewrite", "identity"} <= set(types["query_transform"])
    assert {"cohere", "llm-rerank", "none"} <= set(types["reranker"])
    assert {"json", "markdown"} <= set(types["formatter"])


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


@pytest.mark.usefixtures("fresh_plugins")
def test_entry_point_plugins_register_like_builtins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real installed distribution (dist-info on sys.path) with a flexmatch.chains entry point."""

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
    assert "plugin_echo" in registered()["query_transform"]
    plugins.reset()  # loaded again: the module is imported already
    assert "plugin_echo" in registered()["query_transform"]


def test_a_chain_class_must_subclass_its_kind() -> None:
    with pytest.raises(TypeError, match="must subclass QueryTransform"):

        @register("query_transform", "not_a_transform")
        class Wrong(Chain):
            pass


def _chain_plugins(folder: Path) -> None:
    """An installed distribution (dist-info) with three chain plug-ins: one that fails on
    import, one that tries to take the built-in chunker 'structure', one that works."""
    (folder / "fm_chain_broken.py").write_text("raise RuntimeError('plugin import explodes')\n")
    (folder / "fm_chain_hijack.py").write_text(
        "from flexmatch.chains import Chunker, register\n"
        "@register('chunker', 'structure')\n"
        "class Hijack(Chunker):\n"
        "    pass\n"
    )
    (folder / "fm_chain_fine.py").write_text(
        "from flexmatch.chains import QueryTransform, register\n"
        "@register('query_transform', 'plugin_twice')\n"
        "class Twice(QueryTransform):\n"
        "    async def run(self, query):\n"
        "        return [query, query]\n"
    )
    info = folder / "fm_chain_plugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fm-chain-plugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[flexmatch.chains]\n"
        "redbroken = fm_chain_broken\nhijack = fm_chain_hijack\nfine = fm_chain_fine\n"
    )


@pytest.mark.usefixtures("fresh_plugins")
def test_a_broken_chain_plug_in_is_named_only_when_its_type_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flexmatch.engine.chains import registry
    from flexmatch.engine.chains.chunker.structure import StructureChunker

    _chain_plugins(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # the built-ins and the working plug-in are all there
    assert "plugin_twice" in registered()["query_transform"]
    chunker = build_chain(ChainRef(chain="structure"), Chunker, ChainContext())
    assert type(chunker) is StructureChunker  # the built-in stayed
    broken = registry.broken()
    assert broken["redbroken"] == (
        "'fm_chain_broken' failed to load: RuntimeError: plugin import explodes"
    )
    assert "chunker chain type 'structure' is already registered by " in broken["hijack"]
    assert (
        "StructureChunker (built-in); fm_chain_hijack:Hijack cannot replace it"
        in (broken["hijack"])
    )
    # a chain naming a type nobody registered names the broken plug-ins
    _write_chain(tmp_path, "mine", "kind: chunker\ntype: red-garbage\n")
    with pytest.raises(ConfigError) as raised:
        build_chain(ChainRef(chain="mine"), Chunker, ChainContext(kb_dir=tmp_path))
    message = str(raised.value)
    assert "no chunker chain type 'red-garbage'" in message
    assert "chain type plug-in 'redbroken' may provide it, but 'fm_chain_broken' failed" in message


def test_a_registration_never_replaces_another() -> None:
    from flexmatch.engine.chains.chunker.structure import StructureChunker
    from flexmatch.engine.chains.registry import implementation

    with pytest.raises(ValueError, match=r"'structure' is already registered by .*StructureChunk"):

        @register("chunker", "structure")
        class Hijack(Chunker):
            pass

    assert implementation("chunker", "structure", "x") is StructureChunker


def test_the_cli_works_beside_a_broken_chain_plug_in(tmp_path: Path) -> None:
    from tests.conftest import run, write_config

    plugins = tmp_path / "plugins"
    plugins.mkdir()
    _chain_plugins(plugins)
    env = {"PYTHONPATH": os.pathsep.join([str(plugins), os.environ.get("PYTHONPATH", "")])}
    kb_dir = tmp_path / "kb"
    write_config(kb_dir, "sources:\n  default: {}\n")
    listed = run("chains", "--kb", str(kb_dir), env=env)
    assert listed.returncode == 0, listed.stderr
    assert "plugin_twice" in listed.stdout
    notes = " ".join(listed.stderr.split())
    assert "chain type plug-in 'redbroken' is not used: 'fm_chain_broken' failed to load" in notes
    assert "fm_chain_hijack:Hijack cannot replace it" in notes
    (tmp_path / "ferry.md").write_text("# Ferry\n\nThe ferry leaves at nine.\n")
    done = run("ingest", "--kb", str(kb_dir), str(tmp_path / "ferry.md"), env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_old_kind_and_type_names_still_load(tmp_path: Path) -> None:
    _write_chain(
        tmp_path, "old-rewrite", "kind: query_transform\ntype: llm_question\nprompt: rewrite.j2\n"
    )
    _write_chain(tmp_path, "old-facts", "kind: result_formatter\ntype: markdown\n")
    _write_chain(tmp_path, "old-fusion", "kind: reranker\ntype: fusion\n")
    context = ChainContext(kb_dir=tmp_path, llm=_dummy_llm())
    from flexmatch.engine.chains import Formatter, Reranker
    from flexmatch.engine.chains.query_transform.rewrite import Rewrite
    from flexmatch.engine.chains.reranker.fusion import FusionRerank

    assert type(build_chain(ChainRef(chain="old-rewrite"), QueryTransform, context)) is Rewrite
    assert build_chain(ChainRef(chain="old-facts"), Formatter, context).kind == "formatter"
    assert type(build_chain(ChainRef(chain="old-fusion"), Reranker, context)) is FusionRerank


def test_every_builtin_chain_file_is_named_like_its_type() -> None:
    for path in sorted(builtin_dir("chains").glob("*.yaml")):
        spec = load_spec(path.name, None)
        assert spec.type == path.name.split(".")[0], path.name
