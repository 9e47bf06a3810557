"""Hardware numbers in skills, checked against the hardware model (``apex_core.hardware.specs``).

A skill that tells an agent the MI355X has 128 KiB of LDS is worse than no skill: the agent sizes
its tiles by it. The reference system's skills carried such numbers. So every number written with
a hardware unit (CUs, XCDs, KiB of LDS, MiB of L2, TB/s, TFLOPS, GHz, wavefront lanes, ...) in a
sentence, list item or table cell that names a GPU we model (MI355X, gfx942, CDNA4, H100, Hopper,
...) is read and compared:

- where the model holds that quantity for that GPU, the number must equal it, or be derived from it
  (per XCD, with sparsity, FLOP per byte, FLOP per clock per CU), within the rounding it is written
  with: "2.5 PFLOPS" passes for 2516.6 TFLOPS, "300 CUs" does not pass for 304;
- where the model does not hold it (LDS banks, VGPRs per lane, waves per SIMD, FP32 rates, a field
  the GPU lacks), the line or sentence must cite a public source: a URL, ``(source: ...)``, or a
  named public document (an ISA guide, a white paper, the ROCm or CUDA documentation, ...).

Which GPU a number belongs to: in a table, the GPU its column header names, else the one its row
label names; in prose, the GPU mention nearest to it in the same sentence. Several products behind
one name (gfx942 is the MI300X and the MI325X) pass when any of them holds the number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from apex_core.hardware.specs import SPECS_BY_KEY, GpuSpec

_CI = re.IGNORECASE

GPU_NAMES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern, _CI), keys)
    for pattern, keys in (
        (r"\bMI355X?\b", ("mi355x",)),
        (r"\bMI350X\b", ("mi350x",)),
        (r"\bMI350(?!X)\b", ("mi350x", "mi355x")),
        (r"\bMI325X?\b", ("mi325x",)),
        (r"\bMI300X\b", ("mi300x",)),
        (r"\bMI300(?![XA])\b", ("mi300x", "mi325x")),
        (r"\bgfx950\b|\bCDNA ?4\b", ("mi355x", "mi350x")),
        (r"\bgfx942\b|\bCDNA ?3\b", ("mi300x", "mi325x")),
        (r"\bH100\b", ("h100",)),
        (r"\bH200\b", ("h200",)),
        (r"\bHopper\b|\bsm_?90a?\b", ("h100", "h200")),
        (r"\bB200\b|\bBlackwell\b|\bsm_?100a?\b", ("b200",)),
    )
)
"""How texts name the GPUs of the hardware model, and which products each name stands for."""

CITATION = re.compile(
    r"https?://|\((?:source|sources|see):[^)]+\)|\[(?:source|see):[^\]]+\]"
    r"|\bISA (?:guide|reference)|\binstruction set architecture\b|\bwhite ?paper\b|\bAMDGPUUsage\b"
    r"|\bLLVM AMDGPU\b|\bROCm (?:docs|documentation|blog)\b|\bHIP (?:programming guide|docs|documentation)\b"
    r"|\bCUDA C\+\+ (?:Programming|Best Practices) Guide\b|\b(?:Hopper|Blackwell) tuning guide\b|\bPTX ISA\b"
    r"|\bdatasheet\b|\bbrochure\b|\brocprofiler-compute docs\b|\bcompiler\.py\b",
    _CI,
)
"""What counts as naming a public source on the same line or in the same sentence."""

_NUMBER = r"(?<![\w.,/])(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_UNITS = (
    # (unit name, pattern after the number). Longest first: GB/s before GB, TFLOPS before TF.
    ("flop_per_byte", r"\s*FLOPs?\s*(?:/|per)\s*(?:byte|B)\b"),
    ("flop_per_clk_cu", r"\s*FLOPs?\s*/\s*(?:clk|clock|cycle)\s*/\s*CU\b"),
    ("tbs", r"\s*TB/s\b"),
    ("gbs", r"\s*GB/s\b"),
    ("pflops", r"\s*PFLOP(?:S|s|/s)?\b|\s*PF\b"),
    ("tflops", r"\s*TFLOP(?:S|s|/s)?\b|\s*TF\b"),
    ("kib", r"\s*Ki?B\b"),
    ("mib", r"\s*Mi?B\b"),
    ("gib", r"\s*Gi?B\b"),
    ("ghz", r"\s*GHz\b"),
    ("mhz", r"\s*MHz\b"),
    ("cus", r"\s*(?:CUs?|compute units?|SMs?|streaming multiprocessors?)\b"),
    ("xcds", r"\s*XCDs?\b"),
    ("lanes", r"(?:[- ]wide wave(?:front)?s?|[- ]lanes?\b|\s*threads? (?:per|in an?) (?:wave(?:front)?|warp)\b"
              r"|[- ]thread (?:wave(?:front)?s?|warps?)\b)"),
    ("unheld", r"\s*(?:LDS |memory )?banks?\b|\s*(?:arch(?:itectural)? )?(?:VGPRs?|AGPRs?|AccVGPRs?|SGPRs?)\b"
               r"|\s*(?:waves?|wavefronts?|warps?) per (?:SIMD|EU|CU|SM)\b|\s*SIMDs?\b|\s*B/(?:clk|clock|cycle)\b"
               r"|\s*bytes? per (?:clk|clock|cycle)\b|\s*(?:matrix|tensor) cores?\b"),
)
_WITH_UNIT = re.compile(_NUMBER + "(?P<unit>" + "|".join(f"(?P<{name}>{pattern})" for name, pattern in _UNITS) + ")")
_WAVE_PREFIX = re.compile(
    r"\b(?:wave|warp|wavefront)(?P<num>\d+)\b"
    r"|\b(?:wavefront|warp|wave) size (?:of |is |= ?)?(?P<num2>\d+)\b"
    r"|\b(?:wavefronts?|warps?|waves?) of (?P<num3>\d+)(?: threads| lanes| work-items)?\b", _CI)
_PER_XCD = re.compile(r"\s*(?:of (?:L2|LDS|cache|memory) )?,?\s*(?:one )?(?:per|/|each|an?)\s*XCD\b", _CI)
_PER_GROUP = re.compile(r"\s*(?:per|/|of each|for one|in one|a)\s*(?:thread ?block|block|work-?group|CTA|wave(?:front)?|warp|lane|thread|SIMD)\b", _CI)
_OF_THE_KERNEL = re.compile(
    r"\s*(?:of (?:LDS|shared memory|registers|VGPRs|L2) )?(?:per|a|each|for one|of one|in one)\s+"
    r"(?:pipeline )?(?:stage|tile|buffer|row|column|iteration|K step)s?\b", _CI)
"""A number 'per stage', 'per tile', 'per row' is about the kernel's design, not the GPU: it is not checked."""
_BARE_NUMBER = re.compile(_NUMBER + r"(?![\w.]|\s*%|\s*x\b)")

KEYWORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, _CI))
    for name, pattern in (
        ("lds", r"\bLDS\b|\blocal data share\b|\bshared memory\b|\bsmem\b"),
        ("l1", r"\bL1\b"),
        ("l2", r"\bL2\b"),
        ("ic", r"\bInfinity Cache\b|\bL3\b|\bMALL\b|\bmemory-side cache\b"),
        ("llc", r"\blast-level caches?\b|\bLLC\b"),
        ("regs", r"\b(?:VGPR|AGPR|AccVGPR)s?\b|\bregister file\b|\bregisters?\b"),
        ("link", r"\bInfinity Fabric\b|\bNVLink\b|\bPCIe\b|\blinks?\b|\binterconnect\b"),
        ("hbm", r"\bHBM\w*\b|\bmemory\b|\bVRAM\b|\bDRAM\b"),
    )
)
DTYPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, _CI))
    for name, pattern in (
        ("fp4", r"\b(?:MX)?FP[46]\b|\bfloat4\w*"),
        ("fp8", r"\b(?:OCP )?FP8\b|\bE4M3\w*|\bE5M2\w*|\bfloat8\w*|\bbf8\b"),
        ("bf16", r"\bBF16\b|\bFP16\b|\bbfloat16\b|\bfloat16\b|\bhalf\b"),
        ("other", r"\bFP32\b|\bTF32\b|\bXF32\b|\bFP64\b|\bINT8\b|\bfloat32\b|\bfloat64\b|\bvector\b"),
    )
)
_PEAK_FIELDS = {"fp4": ("peak_fp4_tflops",), "fp8": ("peak_fp8_tflops",), "bf16": ("peak_bf16_tflops", "peak_fp16_tflops")}
DENSITY: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("sparse", re.compile(r"\bsparsity\b|\bsparse\b", _CI)),
    ("dense", re.compile(r"\bdense\b", _CI)),
)
"""A peak written 'with sparsity' is twice the dense one the model holds; the word after the figure decides."""
_WINDOW = 60
"""How far (in characters) a unit's keyword may stand from the number it qualifies, outside the number's
territory; a GPU's name may stand anywhere in the number's segment, clause or sentence."""
_WAVE_LABEL = re.compile(r"\bwave(?:front)? size\b|\bwarp size\b|\blanes\b", _CI)
"""A table row or column about wave width lends its numbers the unit 'lanes'."""


@dataclass(frozen=True)
class NumberFinding:
    """One hardware number the checker read: where, what it says, and how it fared."""

    path: Path
    line: int
    written: str
    status: str
    """'confirmed' (the model holds it), 'cited' (the model does not, a source is named), 'contradicted' (the
    model holds another value) or 'uncited' (the model does not hold it and no source is named)."""
    message: str

    @property
    def ok(self) -> bool:
        return self.status in ("confirmed", "cited")

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}: {self.written!r} {self.message}"


@dataclass(frozen=True)
class _Span:
    """A piece of text checked as one whole (a sentence, a list item, a table cell) and where it came from."""

    text: str
    line: int
    lines: str
    """The full source lines the span touches: a citation anywhere on them counts."""
    gpus: tuple[str, ...] | None = None
    """Table cells: the GPUs their column header or row label names. None: read them from the text."""
    label: str = ""
    """Table cells: column header and row label, which lend a unit and a keyword to the cell's numbers."""


@dataclass(frozen=True)
class _Claim:
    """One written number: its value and unit, and where to look for the quantity it is about."""

    start: int
    end: int
    written: str
    kind: str
    value: float
    decimals: int
    per_xcd: bool
    per_group: bool


# ---------------------------------------------------------------------------------------------
# Reading a Markdown file into spans


def _spans(text: str) -> Iterator[_Span]:
    lines = text.splitlines()
    paragraph: list[tuple[int, str]] = []
    header: list[str] = []
    in_code = False
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("```") or in_code or stripped.startswith(("|", "#")) or not stripped \
                or re.match(r"([-*+]|\d+\.)\s", stripped):
            yield from _sentences(paragraph)
            paragraph = []
        if stripped.startswith("```"):
            in_code = not in_code
        elif in_code or stripped.startswith("#"):
            yield _Span(stripped, number, line)
        elif stripped.startswith("|"):
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            if all(re.fullmatch(r":?-{3,}:?", c) for c in cells if c):
                continue
            starts_table = number == 1 or not lines[number - 2].strip().startswith("|")
            if starts_table:
                header = cells
            yield from _row([] if starts_table else header, cells, number, line)
        elif stripped:
            paragraph.append((number, line))
    yield from _sentences(paragraph)


def _sentences(paragraph: list[tuple[int, str]]) -> Iterator[_Span]:
    """A paragraph (or list item) split into sentences; each reports the line it starts on."""
    joined, starts = "", []
    for number, line in paragraph:
        starts.append((len(joined), number, line))
        joined += line.strip() + " "
    for match in re.finditer(r".+?(?:[.!?][*_\"')\]]*\s+(?=[A-Z`(*\[])|$)", joined):
        if not match.group(0).strip():
            continue
        touched = [(n, t) for i, (start, n, t) in enumerate(starts)
                   if start < match.end() and (i + 1 == len(starts) or starts[i + 1][0] > match.start())]
        yield _Span(match.group(0), touched[0][0], " ".join(t for _, t in touched))


def _row(header: list[str], cells: list[str], number: int, line: str) -> Iterator[_Span]:
    label = cells[0] if cells else ""
    for index, cell in enumerate(cells):
        column = header[index] if index < len(header) else ""
        if index == 0:
            yield _Span(cell, number, line, gpus=_named(column) or None)
            continue
        yield _Span(cell, number, line, gpus=_named(column) or _named(label) or None, label=f"{column} {label}".strip())


# ---------------------------------------------------------------------------------------------
# Numbers, units, GPUs and keywords within a span


def _named(text: str) -> tuple[str, ...]:
    keys: list[str] = []
    for pattern, products in GPU_NAMES:
        if pattern.search(text):
            keys += [k for k in products if k not in keys]
    return tuple(keys)


def _nearest(found: list[tuple[int, int, str | tuple[str, ...]]], start: int, end: int,
             limit: int | None = _WINDOW) -> str | tuple[str, ...] | None:
    """The value of the hit closest to [start, end), within ``limit`` characters (no limit: None)."""
    best, best_distance = None, float("inf")
    for m_start, m_end, value in found:
        distance = start - m_end if m_end <= start else m_start - end if m_start >= end else 0
        if distance < best_distance and (limit is None or distance <= limit):
            best, best_distance = value, distance
    return best


def _nearest_name(text: str, start: int, end: int, table: tuple[tuple[str, re.Pattern[str]], ...],
                  territory: tuple[int, int], after_first: bool = False) -> str | None:
    """The word of ``table`` nearest the claim: first between its neighbouring claims (its territory),
    so that in "5 PF dense and 10 PF with sparsity" each figure gets its own word, else within the window."""
    found: list[tuple[int, int, str | tuple[str, ...]]] = [
        (m.start(), m.end(), name) for name, pattern in table for m in pattern.finditer(text)]
    own = [f for f in found if territory[0] <= f[0] and f[1] <= territory[1]]
    following = [f for f in own if f[0] >= end] if after_first else []
    hit = _nearest(following, start, end) or _nearest(own, start, end) or _nearest(found, start, end)
    return hit if isinstance(hit, str) else None


def _parse(number: str) -> tuple[float, int]:
    plain = number.replace(",", "")
    return float(plain), len(plain.split(".")[1]) if "." in plain else 0


def _claim(start: int, end: int, written: str, kind: str, number: str, after: str) -> _Claim:
    value, decimals = _parse(number)
    if _OF_THE_KERNEL.match(after):
        kind = "kernel"
    return _Claim(start, end, written.strip(), kind, value, decimals, bool(_PER_XCD.match(after)),
                  bool(_PER_GROUP.match(after)))


def _label_unit(label: str) -> str | None:
    """The unit a table header or row label lends its numbers: 'LDS per CU (KiB)' lends KiB."""
    if _WAVE_LABEL.search(label):
        return "lanes"
    for name, pattern in _UNITS:
        if re.search(pattern, label, _CI):
            return name
    return None


def _claims(text: str, label: str) -> list[_Claim]:
    claims = []
    for match in _WITH_UNIT.finditer(text):
        kind = next(name for name, _ in _UNITS if match.group(name) is not None)
        claims.append(_claim(match.start(), match.end(), match.group(0), kind, match.group("num"), text[match.end():]))
    for match in _WAVE_PREFIX.finditer(text):
        number = match.group("num") or match.group("num2") or match.group("num3")
        claims.append(_claim(match.start(), match.end(), match.group(0), "lanes", number, ""))
    kind = _label_unit(label) if label else None
    if kind:
        for match in _BARE_NUMBER.finditer(text):
            if not any(c.start <= match.start() < c.end for c in claims):
                claims.append(_claim(match.start(), match.end(), match.group(0), kind, match.group("num"),
                                     text[match.end():]))
    return claims


# ---------------------------------------------------------------------------------------------
# What the model says a claim should be

Expectation = tuple[str, float]
"""(the model's field or derivation, its value in the claim's own unit)."""


def _field(spec: GpuSpec, name: str | None, scale: float = 1.0) -> list[Expectation] | None:
    value = getattr(spec, name) if name else None
    return None if value is None else [(name, value * scale)]  # type: ignore[list-item]


def _peaks(claim: _Claim, spec: GpuSpec, dtype: str | None, sparse: bool) -> list[Expectation] | None:
    if dtype == "other":
        return None
    names = _PEAK_FIELDS[dtype] if dtype else tuple(f for fields in _PEAK_FIELDS.values() for f in fields)
    peaks = [(n, getattr(spec, n) * (2 if sparse else 1)) for n in names if getattr(spec, n) is not None]
    if not peaks:
        return None
    if claim.kind == "tflops":
        return peaks
    if claim.kind == "pflops":
        return [(n, v / 1e3) for n, v in peaks]
    if claim.kind == "flop_per_byte":
        return [(f"{n} / hbm_bandwidth_tbs", v / spec.hbm_bandwidth_tbs) for n, v in peaks]
    if spec.max_clock_mhz is None:
        return None
    per_clock = spec.compute_units * spec.max_clock_mhz * 1e6
    return [(f"{n} / (compute_units x max_clock_mhz)", v * 1e12 / per_clock) for n, v in peaks]


def _expected(claim: _Claim, spec: GpuSpec, keyword: str | None, dtype: str | None,
              sparse: bool) -> list[Expectation] | None:
    """The values the model allows for this claim on this GPU; None when it holds no such quantity."""
    kind = claim.kind
    if kind == "unheld" or claim.per_group:
        return None
    simple = {"cus": "compute_units", "xcds": "xcds", "lanes": "wavefront_size"}
    if kind in simple:
        return _field(spec, simple[kind])
    if kind in ("ghz", "mhz"):
        return _field(spec, "max_clock_mhz", 1e-3 if kind == "ghz" else 1.0)
    if kind in ("tbs", "gbs"):
        return _field(spec, "hbm_bandwidth_tbs", 1.0 if kind == "tbs" else 1e3) if keyword in (None, "hbm") else None
    if kind == "gib":
        return _field(spec, "memory_gb") if keyword in (None, "hbm") else None
    if kind == "kib":
        return _field(spec, {"lds": "lds_per_cu_kib", "l1": "l1_vector_cache_kib", "regs": "register_file_kib"}.get(keyword or ""))
    if kind == "mib":
        if keyword == "llc":
            return [("l2_cache_mib + infinity_cache_mib", spec.l2_cache_mib + spec.infinity_cache_mib)]
        return _field(spec, {"l2": "l2_cache_mib", "ic": "infinity_cache_mib"}.get(keyword or ""))
    return _peaks(claim, spec, dtype, sparse)


def _matches(claim: _Claim, expected: float) -> bool:
    """Equal within the rounding the number is written with: '2.5' for 2.5166, but not '300' for 304."""
    tolerance = 0.5 * 10 ** -claim.decimals
    return abs(expected - claim.value) <= tolerance * (1 + 1e-9)


def _verdict(claim: _Claim, specs: list[GpuSpec], keyword: str | None, dtype: str | None,
             sparse: bool) -> tuple[str, str]:
    """(status, explanation): 'confirmed' by the model, 'contradicted' by it, or 'unheld' (it has no such number)."""
    allowed: list[tuple[GpuSpec, Expectation]] = []
    for spec in specs:
        expected = _expected(claim, spec, keyword, dtype, sparse)
        if expected is not None and claim.per_xcd:
            expected = [(f"{n} / xcds", v / spec.xcds) for n, v in expected] if spec.xcds else None
        allowed += [(spec, e) for e in expected or []]
    names = "/".join(s.product_name for s in specs)
    if not allowed:
        return "unheld", (f"names a quantity the hardware model does not hold for the {names}: cite a public source "
                          "on the same line (a URL, '(source: ...)', or a named document such as an ISA guide or "
                          "white paper)")
    said = "; ".join(f"{spec.key} {name} = {value:g}" for spec, (name, value) in allowed)
    if any(_matches(claim, value) for _, (_, value) in allowed):
        return "confirmed", said
    return "contradicted", f"contradicts the hardware model ({said})"


# ---------------------------------------------------------------------------------------------
# Checking


def _same_clause(text: str, mentions: list[tuple[int, int, str | tuple[str, ...]]],
                 claim: _Claim) -> list[tuple[int, int, str | tuple[str, ...]]]:
    """The GPU mentions of the claim's list segment (", "), else of its clause ("; "), else of the span.

    "MI300X 192 GB at 5.3 TB/s, MI355X 288 GB at 8 TB/s": the 5.3 belongs to the MI300X, though the
    MI355X stands nearer; "the MI355X has 160 KiB; the MI300X 64 KiB": the 160 belongs to the MI355X."""
    for separators in ((", ", "; "), ("; ",)):
        left = max(text.rfind(sep, 0, claim.start) for sep in separators) + 1
        rights = [i for i in (text.find(sep, claim.end) for sep in separators) if i >= 0]
        right = min(rights) if rights else len(text)
        inside = [m for m in mentions if left <= m[0] and m[1] <= right]
        if inside:
            return inside
    return mentions


def _check_span(span: _Span, path: Path) -> Iterator[NumberFinding]:
    text = re.sub(r"https?://\S+", lambda m: " " * len(m.group(0)), span.text)
    context = f"{span.label} {text}" if span.label else text
    shift = len(context) - len(text)
    mentions: list[tuple[int, int, str | tuple[str, ...]]] = [
        (m.start(), m.end(), keys) for pattern, keys in GPU_NAMES for m in pattern.finditer(text)]
    cited = bool(CITATION.search(span.text) or CITATION.search(span.lines))
    claims = sorted((c for c in _claims(text, span.label)
                     if not any(m_start <= c.start < m_end for m_start, m_end, _ in mentions)),
                    key=lambda c: c.start)  # the 3 of "CDNA 3" is a name, not a number
    for index, claim in enumerate(claims):
        if claim.kind == "kernel":
            continue
        gpus = span.gpus or _nearest(_same_clause(text, mentions, claim), claim.start, claim.end, limit=None)
        if not gpus or isinstance(gpus, str):
            continue  # no GPU named: a tile size or a measured figure, not a fact about a product
        start, end = claim.start + shift, claim.end + shift
        territory = (claims[index - 1].end + shift if index else 0,
                     claims[index + 1].start + shift if index + 1 < len(claims) else len(context))
        keyword = _nearest_name(context, start, end, KEYWORDS, territory)
        dtype = _nearest_name(context, start, end, DTYPES, territory)
        sparse = _nearest_name(context, start, end, DENSITY, territory, after_first=True) == "sparse"
        status, message = _verdict(claim, [SPECS_BY_KEY[k] for k in gpus], keyword, dtype, sparse)
        if status == "unheld":
            status, message = ("cited", "not in the hardware model; a source is cited") if cited else ("uncited", message)
        yield NumberFinding(path, span.line, claim.written, status, message)


def audit_text(text: str, path: Path = Path("<text>")) -> list[NumberFinding]:
    """Every hardware number in ``text`` that names a GPU, with what the model or a citation says of it."""
    return [finding for span in _spans(text) for finding in _check_span(span, path)]


def check_text(text: str, path: Path = Path("<text>")) -> list[NumberFinding]:
    """The numbers in ``text`` the model contradicts, or that it cannot confirm and no source backs."""
    return [finding for finding in audit_text(text, path) if not finding.ok]


def check_skill_folder(folder: Path) -> list[NumberFinding]:
    """SKILL.md and every other Markdown file in the skill's folder (references/ included)."""
    return [f for path in sorted(folder.rglob("*.md")) for f in check_text(path.read_text(encoding="utf-8"), path)]
