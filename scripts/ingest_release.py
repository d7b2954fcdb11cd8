"""Draft the rule-table rows of a vllm-ascend release from its PyPI sdist.

    python scripts/ingest_release.py 0.30.0rc2 [--previous 0.25.1rc1] [--cache DIR] [--cut-fixture DIR]

Fetches ``vllm_ascend-<VERSION>.tar.gz`` (PyPI JSON API, https://pypi.org/pypi/vllm-ascend/json; cached under
``~/.cache/ascendflow/sdists``), reads from it

- the version pins (the ``version_matrix.yaml`` columns): the release's own row of
  ``docs/source/community/versioning_policy.md`` (the source the matrix cites), else — no row yet, as at v0.25.1rc1 —
  the code: ``Dockerfile`` (``ARG VLLM_TAG``, the CANN base image tag or ``ARG CANN_VERSION``), ``pyproject.toml``
  build pins (``torch``, ``torch-npu``, ``triton-ascend``; triton always from here: the table's cell can name a dev
  build) and ``setup.py``'s Python classifiers; where table and code disagree, the checklist says so;
- the ``--additional-config`` key set (``additional_config_keys.yaml``): every top-level key the package reads off a
  dict named ``additional_config`` (``.get("k")``, ``["k"]``, ``"k" in``, or a helper called with the dict and then
  the key, as ``_get_config_value(additional_config, "k", ...)``), in source order, ``ascend_config.py`` first;
- the files the committed rules cite (``*.py`` names in the ``source`` texts of ``engine_rules.yaml``) that differ
  from the previous row's sdist;

and prints a draft ``version_matrix.yaml`` row, ``engine_rules.yaml`` row (``inherit`` + a source stub) and key-set
row, then the checklist for the person adding them (docs/engine_rules.md "Adding a release"). Nothing is written
into the package. Network: PyPI only (``--index-url`` names a mirror with PyPI's JSON API). Exit 2 with one line on
a version PyPI does not have, or when the index cannot be reached (offline: put the sdists in ``--cache``).

Keys a release still accepts with a deprecation warning (v0.30.0rc2's ``ascend_config.py``
``SchedulerConfig.from_additional_config._resolve``: top-level ``recompute_scheduler_enable``,
``short_request_first_config``, ``batch_job_sched_config``... now belong under ``scheduler_config``) are read through a
helper that takes the key as a parameter; they stay in the key set and are listed as ``deprecated_keys``, never as
removed (a draft that dropped them would refuse every PD decode recipe on that release).
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "ascendflow" / "compiler" / "rules" / "data"
INDEX_URL = "https://pypi.org/pypi"
DEFAULT_CACHE = Path.home() / ".cache" / "ascendflow" / "sdists"
POLICY = "docs/source/community/versioning_policy.md"
#: Files the pin and key extraction read besides the package's ``*.py`` (what ``--cut-fixture`` keeps).
PIN_FILES = (POLICY, "Dockerfile", "pyproject.toml", "setup.py", ".github/vllm-release-tag.commit")


class IngestError(RuntimeError):
    """A version PyPI does not have, or an sdist without the files a row is read from."""


# ---------------------------------------------------------------- sources: an sdist, a directory (test fixtures)

class Source:
    """The files of one release: ``{path relative to the project root: text}``, read lazily."""

    def paths(self) -> list[str]:
        raise NotImplementedError

    def read(self, path: str) -> str | None:
        raise NotImplementedError


class SdistSource(Source):
    """A ``.tar.gz`` sdist; the top folder (``vllm_ascend-X/``) is stripped from paths."""

    def __init__(self, path: Path):
        self._files: dict[str, bytes] = {}
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if not member.isfile():
                    continue
                rel = member.name.split("/", 1)[1] if "/" in member.name else member.name
                if rel.endswith((".py", ".md", ".toml", ".commit")) or rel.startswith("Dockerfile"):
                    self._files[rel] = tar.extractfile(member).read()

    def paths(self) -> list[str]:
        return sorted(self._files)

    def read(self, path: str) -> str | None:
        data = self._files.get(path)
        return None if data is None else data.decode("utf-8", errors="replace")


class DirSource(Source):
    """A directory laid out like the project root (``tests/data/releases/<version>/``)."""

    def __init__(self, root: Path):
        self.root = root

    def paths(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())

    def read(self, path: str) -> str | None:
        file = self.root / path
        return file.read_text() if file.is_file() else None


def _get(url: str, timeout: float) -> bytes:
    """The body of ``url``.

    Raises:
        IngestError: the server cannot be reached or answers with an error (one line: the URL and the reason).
    """
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise IngestError(f"{url} answered HTTP {exc.code} ({exc.reason})") from None
    except (urllib.error.URLError, OSError) as exc:  # offline, refused, DNS, time-out
        reason = getattr(exc, "reason", exc)
        raise IngestError(f"cannot reach {url} ({type(reason).__name__}: {reason}); connect to the network, or "
                          f"give --index-url URL of a mirror with PyPI's JSON API, or put the sdist "
                          f"(vllm_ascend-<version>.tar.gz) in --cache DIR") from None


def fetch_sdist(version: str, cache: Path = DEFAULT_CACHE, index_url: str = INDEX_URL) -> Path:
    """The sdist of vllm-ascend ``version``, downloaded once into ``cache`` from ``index_url`` (PyPI's JSON API:
    ``<index_url>/vllm-ascend/json``).

    Raises:
        IngestError: PyPI has no such release, the release has no sdist, or the index cannot be reached.
    """
    target = cache / f"vllm_ascend-{version}.tar.gz"
    if target.is_file():
        return target
    api = f"{index_url.rstrip('/')}/vllm-ascend/json"
    try:
        index = json.loads(_get(api, timeout=60))
    except ValueError:
        raise IngestError(f"{api} is not PyPI's JSON API (its answer is not JSON); give --index-url of one") from None
    files = index.get("releases", {}).get(version)
    if not files:
        near = sorted(index.get("releases", {}), key=_version_key)[-6:]
        raise IngestError(f"vllm-ascend {version} is not on PyPI; newest releases: {', '.join(near)}")
    sdists = [f for f in files if f.get("packagetype") == "sdist"]
    if not sdists:
        raise IngestError(f"vllm-ascend {version} has no sdist on PyPI (wheels only)")
    url = urllib.parse.urljoin(api, sdists[0]["url"])  # PyPI mirrors may give relative URLs
    body = _get(url, timeout=600)
    cache.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    partial.write_bytes(body)
    partial.rename(target)
    return target


def _version_key(version: str) -> tuple:
    try:
        return (0, Version(version))
    except Exception:  # noqa: BLE001 - a non-PEP 440 name sorts first
        return (-1, version)


# ---------------------------------------------------------------- version pins

def policy_row(src: Source, version: str) -> dict[str, str] | None:
    """The release-compatibility table row for ``v<version>`` in the release's own ``versioning_policy.md``:
    ``{vllm, python, cann, torch, torch_npu, triton_ascend}`` as written there (``None``: no such row)."""
    text = src.read(POLICY) or ""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0] == f"v{version}":
            torch, _, torch_npu = (c.strip() for c in cells[4].partition("/"))
            return {"vllm": cells[1].lstrip("v"), "python": cells[2].replace(" ", ""), "cann": cells[3],
                    "torch": torch, "torch_npu": torch_npu.split("+")[0], "triton_ascend": cells[5] or None}
    return None


def code_pins(src: Source) -> dict[str, str | None]:
    """The pins the release's build files state: ``Dockerfile`` (``ARG VLLM_TAG=vX``, else
    ``.github/vllm-release-tag.commit``; CANN from the base image tag ``cann:<X>-...`` or ``ARG CANN_VERSION="<X>_<build>"``,
    ``rc`` written ``RC`` as CANN names its releases),
    ``pyproject.toml`` (``torch==``, ``torch-npu==``, ``triton-ascend==``) and ``setup.py`` (Python classifiers:
    ``>=<lowest>,<<highest + 1>``)."""
    docker = src.read("Dockerfile") or ""
    vllm = re.search(r"ARG VLLM_TAG=v?([\w.]+)", docker)
    tag_file = (src.read(".github/vllm-release-tag.commit") or "").strip().lstrip("v")
    cann = (re.search(r"cann:(\d[\w.]*?)-", docker) or re.search(r'ARG CANN_VERSION="?(\d[\w.]*?)[_"\s]', docker))
    pyproject = src.read("pyproject.toml") or ""

    def pin(name: str) -> str | None:
        found = re.search(rf'"{name}==([^"]+)"', pyproject)
        return found.group(1) if found else None

    classifiers = src.read("setup.py") or ""
    minors = sorted(int(m) for m in re.findall(r"Programming Language :: Python :: 3\.(\d+)", classifiers))
    python = f">=3.{minors[0]},<3.{minors[-1] + 1}" if minors else None
    return {"vllm": vllm.group(1) if vllm else (tag_file or None), "python": python,
            "cann": re.sub(r"rc", "RC", cann.group(1)) if cann else None, "torch": pin("torch"),
            "torch_npu": pin("torch-npu"),
            "triton_ascend": pin("triton-ascend")}


def extract_pins(src: Source, version: str) -> tuple[dict[str, str | None], list[str]]:
    """The draft ``version_matrix.yaml`` row and the disagreements between the policy table and the build files.

    The table row wins (it is the matrix's cited source) except for ``triton_ascend`` (the build pin); a release the
    table does not list yet takes every pin from the build files.
    """
    code = code_pins(src)
    table = policy_row(src, version)
    row = dict(code) if table is None else {**table, "triton_ascend": code["triton_ascend"]}
    notes = []
    if table is None:
        notes.append(f"{POLICY} has no row for v{version}: pins read from Dockerfile/pyproject.toml/setup.py")
    else:
        notes += [f"{k}: table says {table[k]}, build files say {code[k]}" for k in table
                  if k != "triton_ascend" and code[k] is not None and table[k] != code[k]]
    ordered = {"platform": "npu", "vllm": row["vllm"], "vllm_ascend": version, "torch": row["torch"],
               "torch_npu": row["torch_npu"], "cann": row["cann"], "triton_ascend": row["triton_ascend"],
               "python": row["python"]}
    return ordered, notes


# ---------------------------------------------------------------- additional_config keys

def _is_additional_config(node: ast.AST) -> bool:
    """``additional_config``, ``<anything>.additional_config``, or ``(<either> or {})``."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return _is_additional_config(node.values[0])
    return ((isinstance(node, ast.Name) and node.id == "additional_config")
            or (isinstance(node, ast.Attribute) and node.attr == "additional_config"))


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def key_reads(source: str) -> list[tuple[str, ast.AST]]:
    """Top-level ``additional_config`` keys read in one module's source, in source order, with the node that reads
    each: ``additional_config.get("k")``, ``additional_config["k"]`` (load), ``"k" in additional_config`` and a call
    whose arguments are the dict followed (anywhere later) by the key string."""
    found: list[tuple[int, int, str, ast.AST]] = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and _is_additional_config(func.value):
                key = _string(node.args[0]) if node.args else None
            else:
                after = False
                for arg in node.args:
                    if _is_additional_config(arg):
                        after = True
                    elif after and _string(arg) is not None:
                        key = _string(arg)
                        break
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_additional_config(node.value):
            key = _string(node.slice)
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In)
              and _is_additional_config(node.comparators[0])):
            key = _string(node.left)
        if key is not None:
            found.append((node.lineno, node.col_offset, key, node))
    return [(key, node) for _, _, key, node in sorted(found, key=lambda f: (f[0], f[1]))]


def resolver_reads(source: str) -> list[tuple[str, bool, ast.AST]]:
    """Keys read through a helper that takes the key as a parameter, with whether the helper says they are
    deprecated: a function whose body reads ``additional_config[<its parameter>]`` (or ``<parameter> in
    additional_config``), and each call ``helper("key", ...)`` in the module. v0.30.0rc2's
    ``SchedulerConfig.from_additional_config`` resolves ``_resolve("recompute_scheduler_enable", False)``... that way,
    warning "additional_config.%s is deprecated; use additional_config.scheduler_config.%s instead": the key is still
    accepted, so it is deprecated, not removed. In source order."""
    tree = ast.parse(source)
    helpers: dict[str, bool] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.args.args:
            continue
        params = {a.arg for a in fn.args.args}
        reads = any((isinstance(n, ast.Subscript) and _is_additional_config(n.value) and isinstance(n.slice, ast.Name)
                     and n.slice.id in params)
                    or (isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.In)
                        and isinstance(n.left, ast.Name) and n.left.id in params
                        and _is_additional_config(n.comparators[0]))
                    for n in ast.walk(fn))
        if reads:
            helpers[fn.name] = any(isinstance(n, ast.Constant) and isinstance(n.value, str)
                                   and "deprecated" in n.value for n in ast.walk(fn))
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers and node.args
                and _string(node.args[0]) is not None):
            found.append((node.lineno, node.col_offset, _string(node.args[0]), helpers[node.func.id], node))
    return [(key, deprecated, node) for _, _, key, deprecated, node in sorted(found, key=lambda f: (f[0], f[1]))]


def deprecated_keys(src: Source) -> list[str]:
    """Keys the release accepts with a deprecation warning (:func:`resolver_reads`), in first-read order."""
    out: list[str] = []
    for path in package_modules(src):
        try:
            reads = resolver_reads(src.read(path) or "")
        except SyntaxError:
            continue
        out += [key for key, deprecated, _ in reads if deprecated and key not in out]
    return out


def dataclass_fields(source: str) -> list[str]:
    """From v0.27.1rc1 ``AscendConfig`` is a pydantic dataclass with ``extra="forbid"`` (``ascend_config.py``): its
    init fields (annotated class attributes, not ``_``-prefixed, not ``init=False``) less the keys the factory
    ``init_ascend_config`` strips before validation (``_NON_USER_INPUT_KEYS``: derived or injected, so ignored when
    given; those it does read are found as reads). Empty for the older hand-written class."""
    tree = ast.parse(source)
    stripped: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_NON_USER_INPUT_KEYS"
                                                 for t in node.targets) and isinstance(node.value, ast.Set)):
            stripped = {v for v in map(_string, node.value.elts) if v}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "AscendConfig":
            fields = []
            for item in node.body:
                if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                    continue
                name = item.target.id
                no_init = isinstance(item.value, ast.Call) and any(
                    k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in item.value.keywords)
                if not name.startswith("_") and not no_init and name not in stripped:
                    fields.append(name)
            return fields
    return []


def package_modules(src: Source) -> list[str]:
    """The package's modules that mention ``additional_config``, ``vllm_ascend/ascend_config.py`` first."""
    paths = [p for p in src.paths() if p.startswith("vllm_ascend/") and p.endswith(".py")
             and "additional_config" in (src.read(p) or "")]
    return sorted(paths, key=lambda p: (p != "vllm_ascend/ascend_config.py", p))


def extract_keys(src: Source) -> list[str]:
    """The release's ``--additional-config`` key set, in first-read order (``ascend_config.py`` first, its
    dataclass fields before its reads, :func:`dataclass_fields`, then the keys read through a helper,
    :func:`resolver_reads`, deprecated ones included: the release still accepts them)."""
    keys: list[str] = []
    for path in package_modules(src):
        try:
            reads = key_reads(src.read(path) or "") + [(k, n) for k, _, n in resolver_reads(src.read(path) or "")]
            if path == "vllm_ascend/ascend_config.py":
                reads = [(k, None) for k in dataclass_fields(src.read(path) or "")] + reads
        except SyntaxError:
            continue
        for key, _ in reads:
            if key not in keys:
                keys.append(key)
    return keys


# ---------------------------------------------------------------- cited files and what changed

def cited_files(rules_text: str, src: Source) -> list[str]:
    """Package files the committed rules cite (``*.py`` names in ``engine_rules.yaml``), resolved in ``src``: a path
    (``vllm_ascend/worker/worker.py``, ``_310p/worker_310p.py``) by its suffix, a bare name (``mla_v1.py``,
    ``worker.py``) by the package files of that name nearest the package root (``vllm_ascend/utils.py``, not
    ``vllm_ascend/lora/utils.py``). vLLM's own files (``vllm/...``) are not in this sdist and are left out."""
    names = set(re.findall(r"(?<![\w/.])((?:[\w.]+/)*\w+\.py)\b", rules_text))
    package = [p for p in src.paths() if p.startswith("vllm_ascend/") and p.endswith(".py")]
    cited: set[str] = set()
    for name in names:
        if name.startswith("vllm/"):
            continue
        suffix = name.removeprefix("vllm_ascend/")
        matches = [p for p in package if p == f"vllm_ascend/{suffix}" or p.endswith("/" + suffix)]
        if "/" not in suffix and matches:
            depth = min(p.count("/") for p in matches)
            matches = [p for p in matches if p.count("/") == depth]
        cited.update(matches)
    return sorted(cited)


def changed_files(previous: Source, current: Source, paths: list[str]) -> list[tuple[str, str]]:
    """``(path, status)`` for each of ``paths`` that differs: ``changed``, ``added`` or ``removed``."""
    out = []
    for path in paths:
        old, new = previous.read(path), current.read(path)
        if old != new:
            out.append((path, "added" if old is None else "removed" if new is None else "changed"))
    return out


def cited_in_either(rules_text: str, previous: Source, current: Source) -> list[str]:
    return sorted(set(cited_files(rules_text, previous)) | set(cited_files(rules_text, current)))


# ---------------------------------------------------------------- the committed table

def committed_rows() -> tuple[dict, dict, str]:
    """``(version_matrix, additional_config_keys, engine_rules text)`` as committed."""
    matrix = yaml.safe_load((DATA / "version_matrix.yaml").read_text())
    keys = yaml.safe_load((DATA / "additional_config_keys.yaml").read_text())
    return matrix, keys, (DATA / "engine_rules.yaml").read_text()


def previous_row(version: str, matrix: dict) -> str | None:
    """The newest committed vllm-ascend row older than ``version`` (its ``vllm_ascend`` version)."""
    older = [str(r["vllm_ascend"]) for n, r in matrix.items() if n.startswith("vllm-ascend-")
             and Version(str(r["vllm_ascend"])) < Version(version)]
    return max(older, key=Version, default=None)


# ---------------------------------------------------------------- fixtures

def cut_fixture(src: Source, version: str, out: Path) -> None:
    """Write the few excerpts the extraction reads into ``out`` (a test fixture, never whole upstream files): the
    policy table's row, the Dockerfile's VLLM_TAG/CANN lines, the pyproject pins, the setup.py classifiers, and per
    package module each ``additional_config`` read as one expression statement."""
    out.mkdir(parents=True, exist_ok=True)
    keep = {
        POLICY: lambda line: line.startswith(f"| v{version} "),
        "Dockerfile": lambda line: bool(re.match(r"(FROM .*cann|ARG VLLM_TAG|ARG CANN_VERSION)", line)),
        "pyproject.toml": lambda line: bool(re.search(r'"(torch|torch-npu|triton-ascend)==', line)),
        "setup.py": lambda line: "Programming Language :: Python :: 3." in line,
        ".github/vllm-release-tag.commit": lambda line: True,
    }
    for path, wanted in keep.items():
        text = src.read(path)
        if text is None:
            continue
        lines = [line for line in text.splitlines() if wanted(line.strip() if path != POLICY else line)]
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text("\n".join(lines) + "\n")
    for path in package_modules(src):
        text = src.read(path) or ""
        try:
            reads = key_reads(text)
        except SyntaxError:
            continue
        resolved = resolver_reads(text)
        if not reads and not resolved:
            continue
        segments = [f"({ast.get_source_segment(text, node)})" for _, node in reads]
        for helper in dict.fromkeys(n.func.id for _, _, n in resolved):  # the helper, reduced to its read
            note = " (deprecated)" if any(d for _, d, n in resolved if n.func.id == helper) else ""
            segments += [f"def {helper}(config_key):", f'    "additional_config.%s is read{note}"',
                         "    return additional_config[config_key]"]
        segments += [f"({ast.get_source_segment(text, node)})" for _, _, node in resolved]
        if path == "vllm_ascend/ascend_config.py" and dataclass_fields(text):  # v0.27.1rc1+: the accepted fields
            segments = ["class AscendConfig:"] + [f"    {f}: object" for f in dataclass_fields(text)] + segments
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(f"# additional_config reads cut from vllm-ascend {version} {path}\n"
                                + "\n".join(segments) + "\n")


# ---------------------------------------------------------------- the draft

def draft(version: str, current: Source, previous: Source | None, previous_version: str | None) -> dict:
    """Everything the tool prints, as data (``--json``)."""
    matrix, keys_table, rules_text = committed_rows()
    pins, notes = extract_pins(current, version)
    keys = extract_keys(current)
    deprecated = deprecated_keys(current)
    base = keys_table.get(previous_version) if previous_version else None
    changed = (changed_files(previous, current, cited_in_either(rules_text, previous, current))
               if previous is not None else [])
    return {"version": version, "previous": previous_version, "pins": pins, "pin_notes": notes,
            "additional_config_keys": keys, "deprecated_keys": deprecated,
            "previous_keys_committed": base is not None,
            "forbids_unknown_keys": 'extra="forbid"' in (current.read("vllm_ascend/ascend_config.py") or ""),
            "keys_added": [k for k in keys if base is not None and k not in base],
            "keys_removed": [k for k in (base or []) if k not in keys],
            "changed_cited_files": [{"path": p, "status": s} for p, s in changed]}


def render(d: dict) -> str:
    """The draft rows and the checklist as text (YAML rows to paste, then ``- [ ]`` items)."""
    name = f"vllm-ascend-{d['version']}"
    prev = f"vllm-ascend-{d['previous']}" if d["previous"] else None
    matrix_row = yaml.safe_dump({name: d["pins"]}, sort_keys=False, width=120)
    rules_row = yaml.safe_dump({name: {"inherit": prev, "source": f"vllm-ascend v{d['version']} (paired vLLM "
                                       f"{d['pins']['vllm']}): TODO name the files re-read and what changed"}},
                               sort_keys=False, width=120)
    keys_row = yaml.safe_dump({d["version"]: d["additional_config_keys"]}, default_flow_style=None, width=120)
    lines = ["# version_matrix.yaml", matrix_row, "# engine_rules.yaml", rules_row,
             "# additional_config_keys.yaml", keys_row]
    if d["deprecated_keys"]:
        lines.append(f"# deprecated_keys (kept above: accepted with a deprecation warning): {d['deprecated_keys']}")
    lines.append("# checklist")
    lines += [f"- [ ] pins: {n}" for n in d["pin_notes"]]
    if d["previous"]:
        if d["previous_keys_committed"]:
            lines.append(f"- [ ] additional_config keys vs {d['previous']}: added {d['keys_added'] or 'none'}, "
                         f"removed {d['keys_removed'] or 'none'}")
        else:
            lines.append(f"- [ ] additional_config keys: {d['previous']} has no committed key set to compare with")
    if d["forbids_unknown_keys"]:
        lines.append("- [ ] AscendConfig is a pydantic dataclass with extra=\"forbid\": the release itself refuses "
                     "unknown keys (key set = its init fields less _NON_USER_INPUT_KEYS, plus keys read directly)")
        lines.append(f"- [ ] re-read the {len(d['changed_cited_files'])} files the rules cite that changed since "
                     f"{d['previous']} and set every rule that changed (diff the two sdists):")
        lines += [f"      {c['status']:8} {c['path']}" for c in d["changed_cited_files"]]
    lines += [f"- [ ] re-read the paired vLLM {d['pins']['vllm']} files the rules cite (vllm/config/vllm.py, "
              "compilation.py, v1/core/kv_cache_utils.py, engine/arg_utils.py; vLLM sdist on PyPI)",
              "- [ ] tests at every rule that changes, whole values (tests/compiler/test_engine_rules.py)",
              "- [ ] tests/data/releases fixture if the extraction changed (--cut-fixture)",
              "- [ ] docs: the rules table (python scripts/rules_table.py) and docs/engine_rules.md"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="vllm-ascend version on PyPI, e.g. 0.30.0rc2")
    parser.add_argument("--previous", help="the row to diff against (default: the newest committed older row)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"sdist cache (default {DEFAULT_CACHE})")
    parser.add_argument("--json", action="store_true", help="print the draft as JSON")
    parser.add_argument("--index-url", default=INDEX_URL,
                        help=f"base of PyPI's JSON API, or a mirror's (default {INDEX_URL})")
    parser.add_argument("--cut-fixture", type=Path, metavar="DIR",
                        help="also write the excerpts the extraction reads to DIR (tests/data/releases/<version>)")
    args = parser.parse_args(argv)
    try:
        current = SdistSource(fetch_sdist(args.version, args.cache, args.index_url))
        previous_version = args.previous or previous_row(args.version, committed_rows()[0])
        previous = (SdistSource(fetch_sdist(previous_version, args.cache, args.index_url)) if previous_version
                    else None)
    except IngestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    d = draft(args.version, current, previous, previous_version)
    if args.cut_fixture:
        cut_fixture(current, args.version, args.cut_fixture)
    print(json.dumps(d, indent=2) if args.json else render(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
