"""The deployment files under ``deploy/`` (Dockerfile, compose, Kubernetes manifests, the
Qdrant chart's values). No Docker daemon or cluster runs here, so they are checked for what
would break them: they parse, they agree with each other, the options they pass exist in
the real ``flexmatch serve``, and the Kubernetes config and command line serve the probes."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from flexmatch.config import CLUSTER_FIELDS, KBConfig, load_config
from flexmatch.engine.embedders import model_cache_dir
from tests.adapters.http.servers import auth, free_port
from tests.conftest import FLEXMATCH, REPO, run

DEPLOY = REPO / "deploy"
K8S = DEPLOY / "kubernetes"
COMPOSE = DEPLOY / "compose" / "compose.yaml"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}")
PINNED_QDRANT = re.compile(r"^qdrant/qdrant:v\d+\.\d+\.\d+$")


# -- reading the files -------------------------------------------------------------------
def load_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def manifest(kind: str) -> dict[str, Any]:
    """The one object of ``kind`` among the kustomization's resources."""
    found = [doc for doc in k8s_objects() if doc["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def k8s_objects() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    return [doc for name in kustomization["resources"] for doc in load_documents(K8S / name)]


def container() -> dict[str, Any]:
    (only,) = manifest("Deployment")["spec"]["template"]["spec"]["containers"]
    return only


def secret_keys() -> set[str]:
    (secret,) = load_documents(K8S / "secret.yaml")
    assert secret["kind"] == "Secret"
    return set(secret["stringData"])


def configmap_text() -> str:
    return str(manifest("ConfigMap")["data"]["flexmatch.yaml"])


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def required_variables(text: str) -> set[str]:
    """The ``${NAME}`` references in a flexmatch.yaml that have no default."""
    return {m.group(1) for m in ENV_REFERENCE.finditer(text) if m.group(2) is None}


def option_value(args: list[str], option: str) -> str:
    return args[args.index(option) + 1]


@dataclass
class Instruction:
    keyword: str
    arguments: str
    stage: int

    def exec_form(self) -> list[str]:
        return list(json.loads(self.arguments))


def dockerfile() -> list[Instruction]:
    """deploy/Dockerfile as instructions (continuation lines joined, comments dropped),
    each with its build stage (0 = the first FROM)."""
    lines: list[str] = []
    current = ""
    for raw in (DEPLOY / "Dockerfile").read_text(encoding="utf-8").splitlines():
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        if text.endswith("\\"):
            current += text[:-1] + " "
            continue
        lines.append(current + text)
        current = ""
    assert not current, "the Dockerfile ends inside a continued line"
    stage = -1
    instructions = []
    for line in lines:
        keyword, _, arguments = line.partition(" ")
        if keyword.upper() == "FROM":
            stage += 1
        instructions.append(Instruction(keyword.upper(), arguments.strip(), stage))
    return instructions


def final_stage() -> list[Instruction]:
    instructions = dockerfile()
    last = instructions[-1].stage
    return [i for i in instructions if i.stage == last]


def env_of(instructions: list[Instruction]) -> dict[str, str]:
    values: dict[str, str] = {}
    for instruction in instructions:
        if instruction.keyword == "ENV":
            values.update(part.split("=", 1) for part in shlex.split(instruction.arguments))
    return values


def image_command() -> list[str]:
    """What the image runs: its ENTRYPOINT followed by its CMD."""
    stage = final_stage()
    (entrypoint,) = [i.exec_form() for i in stage if i.keyword == "ENTRYPOINT"]
    (command,) = [i.exec_form() for i in stage if i.keyword == "CMD"]
    return entrypoint + command


def serve_command_lines() -> dict[str, list[str]]:
    """The arguments every deployment file passes to the image's ``flexmatch`` entry point
    (compose and the Deployment set no entry point of their own, so it applies)."""
    app = compose()["services"]["flexmatch"]
    assert "entrypoint" not in app and "command" not in container()
    return {
        "Dockerfile": image_command()[1:],
        "compose": app["command"],
        "Deployment": container()["args"],
    }


def check_config(text: str, env: dict[str, str], folder: Path) -> KBConfig:
    """A deployment's flexmatch.yaml, validated by the real loader with ``env``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "flexmatch.yaml").write_text(text, encoding="utf-8")
    config = load_config(folder, env)
    assert config.store.url == env["QDRANT_URL"] and config.store.api_key == env["QDRANT_API_KEY"]
    assert config.service.state_url == env["FLEXMATCH_STATE_URL"]
    return config


# -- Kubernetes ----------------------------------------------------------------------------
def test_every_deploy_yaml_parses_and_manifests_are_named() -> None:
    files = sorted(DEPLOY.rglob("*.yaml"))
    assert {p.name for p in files} >= {"compose.yaml", "deployment.yaml", "qdrant-values.yaml"}
    for path in files:
        assert load_documents(path), f"{path} is empty"
    for path in sorted(K8S.glob("*.yaml")):
        if path.name in ("kustomization.yaml", "qdrant-values.yaml"):
            continue
        for doc in load_documents(path):
            assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"], path


def test_kustomization_lists_every_manifest_but_the_secret_template() -> None:
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    present = {p.name for p in K8S.glob("*.yaml")}
    resources = set(listed["resources"])
    assert resources <= present
    assert present - resources == {"kustomization.yaml", "secret.yaml", "qdrant-values.yaml"}
    kinds = sorted(doc["kind"] for doc in k8s_objects())
    assert kinds == sorted(
        ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service"]
    )


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_renders_the_manifests() -> None:
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60
    )
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    assert {d["kind"] for d in docs} == {d["kind"] for d in k8s_objects()}
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    # the common label is added to objects, never to the selector (which is immutable)
    assert deployment["metadata"]["labels"]["app.kubernetes.io/part-of"] == "flexmatch"
    assert "app.kubernetes.io/part-of" not in deployment["spec"]["selector"]["matchLabels"]


def test_deployment_probes_health_on_the_container_port() -> None:
    spec = container()
    (port,) = spec["ports"]
    assert port["containerPort"] == int(option_value(spec["args"], "--port"))
    for probe, path in (
        ("readinessProbe", "/health/ready"),
        ("livenessProbe", "/health"),
        ("startupProbe", "/health"),
    ):
        get = spec[probe]["httpGet"]
        assert get["path"] == path, probe
        assert get["port"] in (port["name"], port["containerPort"]), probe


def test_deployment_has_requests_limits_and_runs_as_the_images_user() -> None:
    spec = container()
    resources = spec["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and set(resources["limits"]) >= {
        "cpu",
        "memory",
    }
    pod = manifest("Deployment")["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
    (user,) = [i.arguments for i in final_stage() if i.keyword == "USER"]
    uid, gid = user.split(":")
    assert (pod["runAsUser"], pod["runAsGroup"], pod["fsGroup"]) == (int(uid),) + (int(gid),) * 2
    own = spec["securityContext"]
    assert own["allowPrivilegeEscalation"] is False and own["capabilities"]["drop"] == ["ALL"]
    # a read-only root needs writable mounts for the knowledge base and for temp files
    assert own["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m for m in spec["volumeMounts"]}
    volumes = {v["name"]: v for v in manifest("Deployment")["spec"]["template"]["spec"]["volumes"]}
    kb = option_value(spec["args"], "--kb")
    for writable in (kb, "/tmp"):
        assert "emptyDir" in volumes[mounts[writable]["name"]], writable


def test_config_map_is_mounted_where_kb_points() -> None:
    spec = container()
    kb = option_value(spec["args"], "--kb")
    mount = next(m for m in spec["volumeMounts"] if m["mountPath"] == f"{kb}/flexmatch.yaml")
    assert mount["subPath"] == "flexmatch.yaml" and mount["readOnly"] is True
    volumes = manifest("Deployment")["spec"]["template"]["spec"]["volumes"]
    (volume,) = [v for v in volumes if v["name"] == mount["name"]]
    configmap = manifest("ConfigMap")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    assert mount["subPath"] in configmap["data"]


def test_deployment_takes_the_llm_and_qdrant_keys_and_state_url_from_the_secret() -> None:
    env = {e["name"]: e for e in container()["env"]}
    (secret,) = load_documents(K8S / "secret.yaml")
    for name in ("QDRANT_API_KEY", "FLEXMATCH_LLM_API_KEY", "FLEXMATCH_STATE_URL"):
        reference = env[name]["valueFrom"]["secretKeyRef"]
        assert reference["name"] == secret["metadata"]["name"], name
        assert reference["key"] in secret_keys(), name
    assert all("value" not in env[n] for n in ("QDRANT_API_KEY", "FLEXMATCH_LLM_API_KEY"))
    # every ${NAME} the config needs without a default is set in the container
    assert required_variables(configmap_text()) <= set(env)
    assert env["QDRANT_URL"]["value"] == "http://qdrant:6333"  # the chart's release "qdrant"


def test_service_and_autoscaler_target_the_deployment() -> None:
    deployment = manifest("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = manifest("Service")
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = container()["ports"]
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] in (port["name"], port["containerPort"])
    hpa = manifest("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"]) == ("apps/v1", "Deployment")
    assert target["name"] == deployment["metadata"]["name"]
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert "cpu" in container()["resources"]["requests"]  # utilisation is of the request
    pdb = manifest("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_qdrant_chart_values_make_a_cluster_that_fits_the_collection() -> None:
    values = yaml.safe_load((K8S / "qdrant-values.yaml").read_text(encoding="utf-8"))
    nodes = values["replicaCount"]
    assert nodes >= 3 and values["config"]["cluster"]["enabled"] is True
    assert values["persistence"]["size"] and values["resources"]["requests"]
    assert values["podDisruptionBudget"]["enabled"] is True
    # the same Qdrant release as compose runs
    assert f"qdrant/qdrant:{values['image']['tag']}" == compose()["services"]["qdrant"]["image"]
    reference = values["apiKey"]["valueFrom"]["secretKeyRef"]
    assert reference["key"] in secret_keys()
    env = {e["name"]: e for e in container()["env"]}
    assert reference == env["QDRANT_API_KEY"]["valueFrom"]["secretKeyRef"]
    store = yaml.safe_load(configmap_text())["store"]
    assert store["shard_number"] >= nodes  # every node holds shards
    assert 1 < store["replication_factor"] <= nodes  # a node may go down
    assert 1 <= store["write_consistency_factor"] <= store["replication_factor"]


def test_deployment_config_validates_with_kbconfig(tmp_path: Path) -> None:
    env = {
        "QDRANT_URL": "http://qdrant:6333",
        "QDRANT_API_KEY": "qdrant-key",
        "FLEXMATCH_STATE_URL": "postgresql+psycopg://flexmatch:pw@postgres:5432/flexmatch",
        "FLEXMATCH_LLM_API_KEY": "llm-key",
    }
    k8s = check_config(configmap_text(), env, tmp_path / "k8s")
    store = yaml.safe_load(configmap_text())["store"]
    assert k8s.store.cluster_settings() == {name: store[name] for name in CLUSTER_FIELDS}
    compose_env = compose()["services"]["flexmatch"]["environment"]
    compose_text = (DEPLOY / "compose" / "flexmatch.yaml").read_text(encoding="utf-8")
    assert required_variables(compose_text) <= set(compose_env)
    check_config(compose_text, env, tmp_path / "compose")


# -- the image -----------------------------------------------------------------------------
def test_dockerfile_installs_cpu_torch_first_then_the_package_and_bakes_the_model() -> None:
    instructions = dockerfile()
    runs = [(n, i) for n, i in enumerate(instructions) if i.keyword == "RUN"]
    torch = [n for n, i in runs if "torch==2.13.0" in i.arguments]
    package = [n for n, i in runs if 'pip install ".[all]"' in i.arguments]
    prepare = [n for n, i in runs if i.arguments == "flexmatch prepare"]
    assert len(torch) == 1 and len(package) == 1 and prepare
    assert "--index-url https://download.pytorch.org/whl/cpu" in instructions[torch[0]].arguments
    assert torch[0] < package[0] < prepare[0]
    assert "psycopg[binary]" in instructions[package[0]].arguments  # postgresql+psycopg://
    # the model is exported where the runtime stage looks, and copied there
    build = [i for i in instructions[: prepare[0]] if i.stage == instructions[prepare[0]].stage]
    cache = env_of(build)["FLEXMATCH_CACHE"]
    assert env_of(final_stage())["FLEXMATCH_CACHE"] == cache
    copies = [i.arguments.split() for i in final_stage() if i.keyword == "COPY"]
    assert any(c[0].startswith("--from=") and cache.startswith(c[1]) for c in copies)
    # the runtime user checks it finds the model at build time
    stage = final_stage()
    user = next(n for n, i in enumerate(stage) if i.keyword == "USER")
    assert any(i.arguments == "flexmatch prepare" for i in stage[user:] if i.keyword == "RUN")


def test_exported_model_path_follows_flexmatch_cache() -> None:
    cache = env_of(final_stage())["FLEXMATCH_CACHE"]
    script = "from flexmatch.engine.embedders.export import optimized_model_path as p; print(p())"
    found = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "FLEXMATCH_CACHE": cache, "HOME": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).is_relative_to(cache)


def test_image_runs_flexmatch_serve_as_a_non_root_user_with_a_healthcheck() -> None:
    command = image_command()
    assert command[:2] == ["flexmatch", "serve"]
    assert option_value(command, "--host") == "0.0.0.0"
    stage = final_stage()
    users = [i.arguments for i in stage if i.keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    kb = option_value(command, "--kb")
    assert any(f"chown {users[-1]} {kb}" in i.arguments for i in stage if i.keyword == "RUN")
    assert env_of(stage)["FLEXMATCH_KB"] == kb  # `docker exec … flexmatch keys create`
    (healthcheck,) = [i.arguments for i in stage if i.keyword == "HEALTHCHECK"]
    probe = json.loads(healthcheck.split(" CMD ", 1)[1])
    assert f"127.0.0.1:{option_value(command, '--port')}/health'" in probe[-1]
    (expose,) = [i.arguments for i in stage if i.keyword == "EXPOSE"]
    assert expose == option_value(command, "--port")


def test_image_copies_what_the_wheel_is_built_from_and_dockerignore_lets_it_in() -> None:
    needed = {"pyproject.toml", PYPROJECT["project"]["readme"]}
    needed |= set(PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"])
    needed |= set(PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"])
    copied = set()
    for instruction in dockerfile():
        if instruction.keyword == "COPY" and not instruction.arguments.startswith("--from"):
            copied |= set(instruction.arguments.split()[:-1])
    assert needed <= copied
    ignore = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    rules = [line.strip() for line in ignore if line.strip() and not line.startswith("#")]
    assert rules[0] == "*"  # an allow-list: nothing else (.venv, .git, tests) is sent
    assert copied <= {rule[1:] for rule in rules if rule.startswith("!")}


def options_of(*command: str) -> set[str]:
    """The options the real ``flexmatch <command> --help`` lists."""
    shown = run(*command, "--help")
    assert shown.returncode == 0, f"flexmatch {' '.join(command)}: {shown.stderr}"
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", shown.stdout))


def test_every_serve_option_the_deployment_passes_exists() -> None:
    known = options_of("serve")
    assert {"--kb", "--host", "--port"} <= known
    assert image_command()[0] == "flexmatch"
    for where, args in serve_command_lines().items():
        assert args[0] == "serve", where
        passed = {a for a in args if a.startswith("--")}
        assert passed <= known, f"{where}: {sorted(passed - known)} not in flexmatch serve"


def test_commands_in_the_deploy_readme_use_real_options() -> None:
    text = (DEPLOY / "README.md").read_text(encoding="utf-8")
    # `flexmatch <command> ...` up to the end of the line or of the inline code (not the
    # compose service or image of that name: `exec flexmatch flexmatch keys`, `flexmatch:0.1.0`)
    found = re.findall(r"(?<![\w/-])flexmatch (?!flexmatch)((?:keys )?[a-z]+)([^`\n]*)", text)
    commands: dict[str, set[str]] = {}
    for command, rest in found:
        commands.setdefault(command, set()).update(re.findall(r"--[a-z][a-z0-9-]*", rest))
    assert {"serve", "ingest", "keys create", "prepare"} <= set(commands)
    for command, passed in commands.items():
        missing = passed - options_of(*command.split())
        assert not missing, f"flexmatch {command}: {sorted(missing)} do not exist"


# -- compose -------------------------------------------------------------------------------
def test_compose_runs_the_image_with_pinned_qdrant_and_postgres() -> None:
    spec = compose()
    services = spec["services"]
    assert set(services) == {"flexmatch", "qdrant", "postgres"}
    app = services["flexmatch"]
    build = app["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == (
        DEPLOY / "Dockerfile"
    )
    assert app["image"] == container()["image"] == f"flexmatch:{VERSION}"
    assert PINNED_QDRANT.match(services["qdrant"]["image"])
    assert re.match(r"^postgres:\d+\.\d+$", services["postgres"]["image"])
    for name, service in services.items():
        assert service["healthcheck"]["test"][0] == "CMD", name
    assert {"/health/ready" in part for part in app["healthcheck"]["test"]} >= {True}
    for dependency in ("qdrant", "postgres"):
        assert app["depends_on"][dependency]["condition"] == "service_healthy"
    named = set(spec["volumes"])
    for name, target in (
        ("flexmatch", option_value(app["command"], "--kb")),
        ("qdrant", "/qdrant/storage"),
        ("postgres", "/var/lib/postgresql/data"),
    ):
        mounts = [v.split(":") for v in services[name]["volumes"]]
        assert any(m[0] in named and m[1] == target for m in mounts), name
    config = next(v for v in app["volumes"] if v.split(":")[1].endswith("/flexmatch.yaml"))
    source, target, mode = config.split(":")
    assert (COMPOSE.parent / source).is_file() and mode == "ro"
    assert target == option_value(app["command"], "--kb") + "/flexmatch.yaml"
    # flexmatch and Qdrant share one API key; the state URL names the postgres service
    env = app["environment"]
    assert env["QDRANT_URL"] == "http://qdrant:6333"
    qdrant_key = services["qdrant"]["environment"]["QDRANT__SERVICE__API_KEY"]
    assert env["QDRANT_API_KEY"] == qdrant_key
    assert env["FLEXMATCH_STATE_URL"].startswith("postgresql+psycopg://flexmatch:")
    assert env["FLEXMATCH_STATE_URL"].endswith("@postgres:5432/flexmatch")


# -- the Kubernetes setup, served for real -------------------------------------------------
def test_deployment_command_and_config_map_serve_the_probes(tmp_path: Path) -> None:
    """The ConfigMap's flexmatch.yaml and the Deployment's args, run by the real CLI on
    loopback (the embedded store stands in for Qdrant, SQLite for PostgreSQL): both probes
    answer, a key made by `flexmatch keys create` works, and nothing is written under
    $HOME, which is read-only in the image."""
    kb, home = tmp_path / "kb", tmp_path / "home"
    kb.mkdir()
    home.mkdir()
    data = yaml.safe_load(configmap_text())
    for name in CLUSTER_FIELDS:  # they apply to a Qdrant server only (checked above)
        del data["store"][name]
    (kb / "flexmatch.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    port = free_port()
    args = [*container()["args"]]
    args[args.index("--kb") + 1] = str(kb)
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = str(port)
    image_env = env_of(final_stage())
    env = {
        **os.environ,
        "HOME": str(home),
        "FLEXMATCH_CACHE": str(model_cache_dir()),  # where the image's is, here
        "QDRANT_URL": "",  # empty: the embedded store
        "QDRANT_API_KEY": "",
        "FLEXMATCH_STATE_URL": f"sqlite:///{tmp_path / 'state.sqlite'}",
        "HF_HUB_OFFLINE": "1",
        "ORT_DISABLE_TELEMETRY": image_env["ORT_DISABLE_TELEMETRY"],
    }
    token = run("keys", "create", "--kb", str(kb), "--permissions", "read,write", env=env)
    assert token.returncode == 0, token.stderr
    process = subprocess.Popen(
        [str(FLEXMATCH), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 90
            while True:
                assert process.poll() is None, process.communicate()[1]
                try:
                    if client.get(container()["readinessProbe"]["httpGet"]["path"]).is_success:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "the server never became ready"
                time.sleep(0.2)
            assert client.get(container()["livenessProbe"]["httpGet"]["path"]).is_success
            headers = auth(token.stdout.strip())
            response = client.post(
                "/v1/documents",
                files={"files": ("note.md", b"# Note\n\nThe spare key is under the blue pot.")},
                headers=headers,
            )
            assert response.status_code == 202, response.text
            job_url = response.headers["location"]
            while (job := client.get(job_url, headers=headers).json())["status"] != "done":
                assert job["status"] in ("queued", "running") and time.monotonic() < deadline
                time.sleep(0.05)
            found = client.get("/v1/search", params={"query": "spare key"}, headers=headers)
            assert found.status_code == 200, found.text
            assert "blue pot" in found.json()["results"][0]["content"]
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert "Traceback" not in stderr
    assert list(home.rglob("*")) == []
