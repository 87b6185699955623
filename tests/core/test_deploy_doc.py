"""docs/deploy.md works as written (issue 35, item 7): the images it names are releases of the image table, the
Deployment runs the image its build command targets, the Dockerfile it shows is the one build writes, every
``repo-builder`` command in it parses, and the NVCF steps nobody could run here say so."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import pytest
from click.core import ParameterSource

from repo_builder.cli.main import cli
from repo_builder.deploy_target import resolve_target
from repo_builder.pipelines.step_packages import ShippedPackage, dockerfile_text
from repo_builder.repository.kserve import DEFAULT_TRITON_IMAGE_TAG
from repo_builder.triton_images import IMAGES

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
STOCK_IMAGE = re.compile(r"nvcr\.io/nvidia/tritonserver:([^\s`'\"]+?)-py3")
UNTESTED = "**untested here**"
# What only an NVCF account could run: its APIs, the NGC CLI, the registry push, NVIDIA's container validator.
NVCF_ACTION = re.compile(r"ngc cf |api\.ngc\.nvidia\.com|api\.nvcf\.nvidia\.com|docker push|docker login|test_container\.py")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_STEP = re.compile(r"^\d+\. ")
_VALUE_TYPES = (click.Choice, click.types.IntParamType, click.types.FloatParamType, click.types.BoolParamType)


def section(text: str, title: str) -> str:
    """The ``## `` section whose heading starts with ``title``, up to the next one."""
    match = re.search(rf"^## {re.escape(title)}.*?(?=^## |\Z)", text, flags=re.S | re.M)
    assert match is not None, f"docs/deploy.md has no section '## {title}'"
    return match.group(0)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, text) of every fenced block, indented ones (inside list items) dedented."""
    blocks: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, language, body = len(fence.group(1)), fence.group(2), []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        blocks.append((language, "\n".join(body) + "\n"))
        i += 1
    return blocks


def commands(text: str, program: str = "repo-builder") -> list[str]:
    """Every command line of the shell blocks that runs ``program``, continuation lines joined."""
    found = []
    for language, body in code_blocks(text):
        if language not in ("sh", "bash", ""):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            if line.strip().startswith(program + " "):
                found.append(line.strip())
    return found


def option_value(line: str, option: str) -> str | None:
    words = shlex.split(line, comments=True)
    return words[words.index(option) + 1] if option in words else None


def _resolve(words: list[str]) -> tuple[str, click.Command, list[str]]:
    """The (sub)command a ``repo-builder`` argument list runs, and the arguments left for it."""
    command: click.Command = cli
    name, rest = "repo-builder", list(words)
    while isinstance(command, click.Group):
        assert rest, f"'{name}' needs a subcommand"
        name = rest.pop(0)
        sub = command.get_command(click.Context(command, info_name=name), name)
        assert sub is not None, f"no such command: {name}"
        command = sub
    return name, command, rest


def option_problems(line: str) -> list[str]:
    """One line per option of a ``repo-builder ...`` command line that its command does not take, or whose
    value its type refuses (choices, numbers). Paths are not checked: the doc's are examples."""
    name, command, rest = _resolve(shlex.split(line, comments=True)[1:])
    options = {o: p for p in command.params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)}
    problems, words = [], iter(rest)
    for word in words:
        if not word.startswith("-") or word == "-":
            continue
        flag = word.split("=", 1)[0]
        param = options.get(flag)
        if param is None and flag not in ("-h", "--help"):
            problems.append(f"{line}: '{name}' has no option {flag}")
        elif param is not None and not param.is_flag and not param.count and "=" not in word:
            next(words, None)  # its value, which may start with '-'
    ctx = command.make_context(name, list(rest), resilient_parsing=True)
    for param in command.params:
        given = param.name is not None and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE
        if given and isinstance(param.type, _VALUE_TYPES) and ctx.params.get(param.name or "") is None:
            problems.append(f"{line}: '{name}' refuses the value of {'/'.join(param.opts)}")
    return problems


def nvcf_lines_outside_untested_steps(text: str) -> list[str]:
    """Lines that do something on NVCF but are not part of a numbered step marked untested."""
    bad, step = [], None
    for line in text.splitlines():
        if line.startswith("#"):
            step = None
        elif _STEP.match(line):
            step = line
        elif line.strip() and not line.startswith((" ", "\t")):
            step = None  # a paragraph at the margin ends the list
        if NVCF_ACTION.search(line) and (step is None or UNTESTED not in step):
            bad.append(line.strip())
    return bad


# --- the parsers themselves can fail ------------------------------------------------------------------------


def test_option_problems_names_an_unknown_option_and_a_refused_choice_when_given_bad_lines() -> None:
    assert option_problems("repo-builder build resnet50 --out repo --triton-release 24.12 --nvcf-assets") == []
    assert option_problems("repo-builder validate repo --http-header-forward-pattern '-x'") == []
    assert option_problems("repo-builder build resnet50 --out repo --triton-relase 24.12") == [
        "repo-builder build resnet50 --out repo --triton-relase 24.12: 'resnet50' has no option --triton-relase"
    ]
    refused = option_problems("repo-builder build text-classifier --out repo --step-packages docker")
    assert refused == ["repo-builder build text-classifier --out repo --step-packages docker: 'text-classifier' "
                       "refuses the value of --step-packages"]
    with pytest.raises(AssertionError, match="no such command"):
        option_problems("repo-builder deploy repo")


def test_code_blocks_and_commands_read_indented_blocks_and_continuations_when_in_list_items() -> None:
    text = "1. step\n\n   ```sh\n   repo-builder build resnet50 \\\n     --out repo\n   ```\n\n```yaml\nimage: x\n```\n"
    assert code_blocks(text) == [("sh", "repo-builder build resnet50 \\\n  --out repo\n"), ("yaml", "image: x\n")]
    assert commands(text) == ["repo-builder build resnet50    --out repo"]


def test_nvcf_lines_outside_untested_steps_names_an_unmarked_step_when_one_is_there() -> None:
    text = "### Create\n\n1. **untested here** Create:\n\n   ```sh\n   ngc cf function create --name f\n   ```\n\n" \
           "2. Deploy:\n\n   ```sh\n   ngc cf function deploy create x\n   ```\n\nThen `docker push` it.\n"
    assert nvcf_lines_outside_untested_steps(text) == ["ngc cf function deploy create x", "Then `docker push` it."]


# --- the document against the code ---------------------------------------------------------------------------


def test_every_stock_image_named_is_a_release_of_the_image_table() -> None:
    named = STOCK_IMAGE.findall(DOC)
    assert len(named) >= 5, "the doc should name the stock images it deploys"
    unknown = sorted({r for r in named if r != "<release>" and r not in IMAGES})
    assert unknown == [], f"docs/deploy.md names stock images of releases repo_builder/triton_images.py lacks: {unknown}"


def test_deployment_runs_the_stock_image_of_the_release_its_build_command_names() -> None:
    poll = section(DOC, "3a.").split("### With `--step-packages dockerfile`")[0]
    builds = [c for c in commands(section(DOC, "1.")) + commands(poll) if c.startswith("repo-builder build ")]
    releases = {option_value(c, "--triton-release") for c in builds}
    assert len(builds) >= 2 and len(releases) == 1 and None not in releases, builds
    (release,) = releases
    images = [re.search(r"^\s*image:\s*(\S+)", body, flags=re.M) for lang, body in code_blocks(poll) if lang == "yaml"]
    assert images and images[0] is not None, "section 3a has no Deployment with an image"
    assert images[0].group(1) == IMAGES[str(release)].image
    assert f"# {IMAGES[str(release)].image}" in poll  # what `jq -r .target.image` prints, as the doc shows it


def test_dockerfile_shown_is_the_one_build_writes_for_the_packages_it_lists() -> None:
    variant = section(DOC, "3a.").split("### With `--step-packages dockerfile`", 1)[1]
    (build,) = [c for c in commands(variant) if c.startswith("repo-builder build ")]
    assert option_value(build, "--step-packages") == "dockerfile"
    release = option_value(build, "--triton-release")
    assert release is not None
    (shown,) = [body for lang, body in code_blocks(variant) if lang == "dockerfile"]
    run = re.search(r"^RUN pip3 install --no-cache-dir (.+)$", shown, flags=re.M)
    assert run is not None, shown
    packages = [ShippedPackage(pin.split("==")[0], pin.split("==")[-1], ()) for pin in run.group(1).split()]
    assert packages and all(p.version for p in packages)
    assert shown.splitlines() == dockerfile_text(resolve_target(release), packages).splitlines()
    said = re.search(r"needs an image built from repo/Dockerfile \(([^)]*)\)", variant)
    assert said is not None and said.group(1).split(", ") == sorted(p.pin for p in packages)
    # The Deployment runs the image built and pushed from it.
    (tag,) = {option_value(c, "-t") for c in commands(variant, "docker") if c.startswith("docker build ")}
    assert f"docker push {tag}" in variant
    images = [re.search(r"^\s*image:\s*(\S+)", body, flags=re.M) for lang, body in code_blocks(variant) if lang == "yaml"]
    assert images and images[0] is not None and images[0].group(1) == tag


def test_built_for_lines_are_the_target_description_build_prints() -> None:
    shown = re.findall(r"built for: (Triton [^`\n]*?, (?:GPU|CPU-only) server)", DOC)
    assert shown, "the doc should show build's 'built for:' line"
    for line in shown:
        release = re.match(r"Triton (\S+) ", line)
        assert release is not None and line == resolve_target(release.group(1)).describe()


def test_every_repo_builder_command_in_the_doc_uses_options_that_exist() -> None:
    lines = commands(DOC)
    assert len(lines) >= 10 and any("--step-packages dockerfile" in line for line in lines)
    problems = [p for line in lines for p in option_problems(line)]
    assert problems == []


def test_nvcf_function_runs_the_image_its_build_targets_with_the_forward_pattern() -> None:
    nvcf = section(DOC, "5.")
    (build,) = [c for c in commands(nvcf) if c.startswith("repo-builder build ")]
    release = option_value(build, "--triton-release")
    assert release is not None and "--nvcf-assets" in build
    (dockerfile,) = [body for lang, body in code_blocks(nvcf) if lang == "dockerfile"]
    assert dockerfile.splitlines()[0] == f"FROM {IMAGES[release].image}"
    assert re.search(r"^COPY (--chown=\S+ )?repo/ /models/$", dockerfile, flags=re.M)
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, flags=re.M)
    assert cmd is not None
    argv = json.loads(cmd.group(1))
    assert argv[0] == "tritonserver" and "--model-repository=/models" in argv
    assert argv[argv.index("--http-header-forward-pattern") + 1] == "NVCF-.*"


def test_nvcf_steps_are_marked_untested_here() -> None:
    nvcf = section(DOC, "5.")
    create = nvcf.split("### Create and deploy the function", 1)[1].split("\n### ", 1)[0]
    for needed in ("ngc cf function create", "ngc cf function deploy create", "/v2/nvcf/functions",
                   "/v2/nvcf/deployments/functions/", "--deployment-specification"):
        assert needed in create, f"the NVCF create/deploy steps lost '{needed}'"
    steps = [line for line in create.splitlines() if _STEP.match(line)]
    assert len(steps) >= 3 and all(UNTESTED in step for step in steps), steps
    assert nvcf_lines_outside_untested_steps(nvcf) == []
    assert "no NVCF account" in create


def test_kserve_runtime_version_named_is_the_one_publish_writes() -> None:
    from repo_builder.repository.kserve import settings_for
    from repo_builder.store.urls import parse_store_url

    location = parse_store_url("s3://models/prod/clf")
    named = re.findall(r'runtimeVersion: "([^"]+)"', DOC)
    built_for = settings_for("clf", location, release="24.12").runtime_version
    assert named == [built_for, DEFAULT_TRITON_IMAGE_TAG], "publish --kserve's runtimeVersion changed: update section 3b"
    assert settings_for("clf", location).runtime_version == DEFAULT_TRITON_IMAGE_TAG


def test_what_is_tested_says_no_container_ran_and_names_the_emulation() -> None:
    tested = section(DOC, "6. What is tested here, and what is not")
    assert "No container was run here" in tested and "no Docker engine" in tested
    assert (ROOT / "tests" / "pipelines" / "test_stock_image_targets.py").is_file()
    assert "tests/pipelines/test_stock_image_targets.py" in tested
