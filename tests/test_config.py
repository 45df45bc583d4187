from __future__ import annotations

from pathlib import Path

import pytest

from flexmatch.config import QUERY_SIDE, SOURCE_SIDE, KBConfig, load_config, source_chain_refs
from flexmatch.errors import ConfigError
from tests.conftest import write_config


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path)
    assert config == KBConfig()
    assert config.query.top_n == 5 and config.query.top_k == 50
    assert config.sources["default"].matching_text.chain == "questions"


def test_env_interpolation_with_defaults(tmp_path: Path) -> None:
    write_config(tmp_path, "models:\n  llm: ${MY_LLM}\n  llm_api_base: ${NOPE:-http://x/v1}\n")
    config = load_config(tmp_path, env={"MY_LLM": "openai/gpt-4o-mini"})
    assert config.models.llm == "openai/gpt-4o-mini"
    assert config.models.llm_api_base == "http://x/v1"


def test_empty_env_value_means_no_llm(tmp_path: Path) -> None:
    write_config(tmp_path, "models:\n  llm: ${FLEXMATCH_LLM:-}\n")
    assert load_config(tmp_path, env={}).models.llm is None


def test_unset_env_variable_is_named(tmp_path: Path) -> None:
    path = write_config(tmp_path, "models:\n  llm: ${MISSING_VAR}\n")
    with pytest.raises(ConfigError, match=r"flexmatch\.yaml.*MISSING_VAR"):
        load_config(tmp_path, env={})
    assert path.exists()


def test_unknown_field_names_file_and_field(tmp_path: Path) -> None:
    write_config(tmp_path, "query:\n  top_nn: 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, env={})
    assert "flexmatch.yaml" in str(info.value)
    assert "query.top_nn" in str(info.value) and "unknown field" in str(info.value)


def test_wrong_type_names_field(tmp_path: Path) -> None:
    write_config(tmp_path, "query:\n  top_n: many\n")
    with pytest.raises(ConfigError, match=r"query\.top_n"):
        load_config(tmp_path, env={})


def test_bad_yaml_is_a_config_error(tmp_path: Path) -> None:
    write_config(tmp_path, "query: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(tmp_path, env={})


def test_default_source_must_exist(tmp_path: Path) -> None:
    write_config(tmp_path, "default_source: web\n")
    with pytest.raises(ConfigError, match="default_source 'web'"):
        load_config(tmp_path, env={})


def test_chain_refs_accept_name_or_mapping(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "sources:\n  notes:\n    chunker: {chain: window, params: {max_tokens: 100}}\n"
        "    matching_text: sentences\ndefault_source: notes\n",
    )
    source = load_config(tmp_path, env={}).sources["notes"]
    assert source.chunker.chain == "window" and source.chunker.params == {"max_tokens": 100}
    assert source.matching_text.chain == "sentences"


def test_builtin_config_template_validates(tmp_path: Path) -> None:
    from flexmatch.knowledge_base import KnowledgeBase

    KnowledgeBase.init(tmp_path / "kb")
    config = load_config(tmp_path / "kb", env={})
    assert config.models.llm is None and config.store.url is None
    with pytest.raises(ConfigError, match="already exists"):
        KnowledgeBase.init(tmp_path / "kb")


def test_a_sources_six_chains_resolve_in_one_place(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "sources:\n  faq: {}\n  catalog:\n    matching_text: keywords\n"
        "    query_transform: keywords\ndefault_source: faq\n"
        "query:\n  reranker: none\n",
    )
    config = load_config(tmp_path)
    faq, catalog = (source_chain_refs(config, name) for name in ("faq", "catalog"))
    assert list(faq) == [*SOURCE_SIDE, *QUERY_SIDE]
    assert (faq["query_transform"].ref.chain, faq["query_transform"].own) == ("rewrite", False)
    assert (catalog["query_transform"].ref.chain, catalog["query_transform"].own) == (
        "keywords",
        True,
    )
    assert faq["reranker"].ref.chain == "none" and faq["formatter"].ref.chain == "markdown"
    assert catalog["matching_text"].ref.chain == "keywords"
    with pytest.raises(ConfigError, match=r"kb\.yaml: no source named 'nope' \(sources: catalog"):
        source_chain_refs(config, "nope", "kb.yaml")


def test_the_old_query_transform_key_still_loads(tmp_path: Path) -> None:
    write_config(tmp_path, "query:\n  transform: identity\n")
    assert load_config(tmp_path).query.query_transform.chain == "identity"
    write_config(tmp_path, "query:\n  transform: identity\n  query_transform: rewrite\n")
    with pytest.raises(ConfigError, match="not also its old spelling transform"):
        load_config(tmp_path)


def test_builtin_sources_take_options_or_the_shorthand_fields(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "sources:\n  default:\n    options: {include: ['*.md']}\n"
        "  site:\n    type: web\n    options: {urls: ['https://example.com/'], crawl: true}\n"
        "  facts:\n    type: records\n    id_field: key\n",
    )
    sources = load_config(tmp_path).sources
    assert sources["default"].include == ["*.md"] and sources["default"].options == {}
    assert sources["site"].urls == ["https://example.com/"] and sources["site"].crawl
    assert sources["facts"].id_field == "key"
    write_config(tmp_path, "sources:\n  default:\n    options: {urls: ['https://a.example/']}\n")
    with pytest.raises(ConfigError, match="source type 'files' has no option 'urls'"):
        load_config(tmp_path)
    write_config(
        tmp_path, "sources:\n  default:\n    include: ['a']\n    options: {include: ['b']}\n"
    )
    with pytest.raises(ConfigError, match="'include' is given twice"):
        load_config(tmp_path)


@pytest.mark.parametrize(
    ("given", "seconds"), [("30s", 30), ("15m", 900), ("1h", 3600), ("1d", 86_400), (600, 600)]
)
def test_a_schedule_is_an_interval(tmp_path: Path, given: object, seconds: float) -> None:
    write_config(tmp_path, f"sources:\n  default:\n    paths: [notes]\n    schedule: {given}\n")
    source = load_config(tmp_path).sources["default"]
    assert source.schedule == seconds and source.schedule_tenants == ["default"]
    assert KBConfig().sources["default"].schedule is None


@pytest.mark.parametrize(
    ("given", "says"), [("5s", "10"), ("soon", "not an interval"), ("-1m", "10")]
)
def test_a_bad_schedule_is_refused_naming_the_source(tmp_path: Path, given: str, says: str) -> None:
    write_config(tmp_path, f"default_source: notes\nsources:\n  notes:\n    schedule: {given}\n")
    with pytest.raises(ConfigError, match="schedule") as raised:
        load_config(tmp_path)
    assert "notes" in str(raised.value) and says in str(raised.value)
