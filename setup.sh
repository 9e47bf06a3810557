#!/usr/bin/env bash
# One-command set-up for Apex: a virtual environment in .venv with the package, its dependencies
# and the right PyTorch build for this machine, plus the agent CLIs wired to the project.
#
#   bash setup.sh                     ask which agent CLIs to wire
#   bash setup.sh --non-interactive   detect the installed CLIs and accept every default
#   bash setup.sh --cli claude,codex  wire exactly these (claude, codex, cursor, all, none)
#   bash setup.sh --skip-downloads    skip the optional large downloads (ROCm sources, PDFs)
#   bash setup.sh --venv PATH         use another virtual environment
#
# A second run with nothing changed only checks the environment and exits in seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
INTERACTIVE=1
SKIP_DOWNLOADS=0
CLIS=""
QUIET=0

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "setup.sh: $*" >&2; exit 2; }
say() { [ "$QUIET" = 1 ] || echo "$@"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --non-interactive) INTERACTIVE=0 ;;
    --skip-downloads) SKIP_DOWNLOADS=1 ;;
    --quiet) QUIET=1 ;;
    --cli) [ $# -ge 2 ] || die "--cli needs a value: claude, codex, cursor, all or none (comma-separated)"; CLIS="$2"; shift ;;
    --cli=*) CLIS="${1#--cli=}" ;;
    --venv) [ $# -ge 2 ] || die "--venv needs a path"; VENV="$2"; shift ;;
    --venv=*) VENV="${1#--venv=}" ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1'; expected --non-interactive, --skip-downloads, --cli LIST, --venv PATH or --help" ;;
  esac
  shift
done
[ -t 0 ] || INTERACTIVE=0

# --- which agent CLIs to wire ------------------------------------------------------------------
detect_clis() {
  local found=()
  command -v claude >/dev/null 2>&1 && found+=(claude)
  command -v codex >/dev/null 2>&1 && found+=(codex)
  { command -v cursor-agent >/dev/null 2>&1 || command -v agent >/dev/null 2>&1; } && found+=(cursor)
  local IFS=,; echo "${found[*]:-none}"
}
if [ -z "$CLIS" ]; then
  DETECTED="$(detect_clis)"
  if [ "$INTERACTIVE" = 1 ]; then
    read -r -p "Which agent CLIs should Apex wire? [claude, codex, cursor, all, none] (detected: $DETECTED): " ANSWER
    CLIS="${ANSWER:-$DETECTED}"
  else
    CLIS="$DETECTED"
  fi
fi
CLIS="$(echo "$CLIS" | tr 'A-Z ' 'a-z,' | sed 's/,,*/,/g; s/^,//; s/,$//')"
[ "$CLIS" = all ] && CLIS="claude,codex,cursor"
IFS=, read -r -a CLI_LIST <<< "$CLIS"
for cli in "${CLI_LIST[@]}"; do
  case "$cli" in claude|codex|cursor|none) ;; *) die "unknown agent CLI '$cli'; choose from claude, codex, cursor, all, none" ;; esac
done

# --- python and the virtual environment -------------------------------------------------------
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.12 python3.11 python3.10 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      PYTHON="$candidate"; break
    fi
  done
fi
[ -n "$PYTHON" ] || die "Python 3.10 or newer is required; install it (e.g. apt-get install python3 python3-venv) and run again"

if [ ! -x "$VENV/bin/python" ]; then
  say "==> creating $VENV with $("$PYTHON" --version)"
  "$PYTHON" -m venv "$VENV" || die "could not create $VENV; on Debian/Ubuntu install python3-venv"
fi
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip --disable-pip-version-check)
[ "$QUIET" = 1 ] && PIP+=(-q)

# The stamp records what was installed; with it unchanged and the imports working, nothing is redone.
STAMP_FILE="$VENV/.apex-setup-stamp"
STAMP="$(cat pyproject.toml setup.sh | sha256sum | cut -c1-16)"
if [ -f "$STAMP_FILE" ] && [ "$(cat "$STAMP_FILE")" = "$STAMP" ] \
   && "$VPY" -c 'import apex_core, torch, numpy, pydantic, fastmcp, mcp, typer' >/dev/null 2>&1; then
  say "==> $VENV is up to date"
else
  # --- torch: ROCm build where ROCm is present, otherwise what this machine's pip resolves -----
  HAS_ROCM=0
  if command -v rocminfo >/dev/null 2>&1 || [ -f /opt/rocm/.info/version ]; then HAS_ROCM=1; fi
  if "$VPY" -c 'import torch, sys; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); sys.exit(not (2, 4) <= v < (3, 0))' >/dev/null 2>&1; then
    say "==> keeping torch $("$VPY" -c 'import torch; print(torch.__version__)')"
  elif [ "$HAS_ROCM" = 1 ]; then
    # Not exercised on our machines (no ROCm there): follows PyTorch's documented ROCm wheel index.
    ROCM_SERIES="${APEX_ROCM_SERIES:-$(cut -d. -f1,2 /opt/rocm/.info/version 2>/dev/null || echo 7.2)}"
    say "==> installing torch for ROCm $ROCM_SERIES"
    "${PIP[@]}" install --no-compile torch --index-url "https://download.pytorch.org/whl/rocm$ROCM_SERIES"
  else
    TORCH_SPEC="torch==${APEX_TORCH_VERSION:-2.13.0}"
    say "==> installing $TORCH_SPEC"
    "${PIP[@]}" install --no-compile "$TORCH_SPEC" || "${PIP[@]}" install --no-compile 'torch>=2.4,<3'
  fi

  # --- the package and the rest of its dependencies -------------------------------------------
  EXTRAS="dev,rl,ray,openenv,verifiers,trl"
  # The ROCm torch brings its own Triton (pytorch-triton-rocm); PyPI's triton would replace it.
  "$VPY" -c 'import torch, sys; sys.exit(not getattr(torch.version, "hip", None))' >/dev/null 2>&1 || EXTRAS="$EXTRAS,triton"
  # uv resolves, downloads and installs on every core: about 10 s here against about two minutes
  # for pip's one process on the 2-core CI machine (docs/testing.md). pip stays the fallback, and
  # APEX_INSTALLER=pip chooses it.
  INSTALLER="${APEX_INSTALLER:-uv}"
  if [ "$INSTALLER" = uv ] && ! "$VPY" -m uv --version >/dev/null 2>&1 \
     && ! "${PIP[@]}" install -q 'uv>=0.9,<1' >/dev/null 2>&1; then
    say "    (uv could not be installed; installing with pip)"
    INSTALLER=pip
  fi
  say "==> installing apex-kernels[$EXTRAS] with $INSTALLER"
  if [ "$INSTALLER" = uv ]; then
    # uv does not read pip's configuration: the indexes, links and constraints pip is told to use
    # here are passed on. Copies, not links into uv's cache: the patcher's tests rewrite installed
    # files, which must never reach the cache.
    UV=("$VPY" -m uv pip install --python "$VPY" --link-mode copy --index-strategy unsafe-best-match)
    [ "$QUIET" = 1 ] && UV+=(-q)
    while IFS= read -r argument; do UV+=("$argument"); done < <("$VPY" -m apex_core.installer)
    "${UV[@]}" -e ".[$EXTRAS]"
  else
    "${PIP[@]}" install --no-compile -e ".[$EXTRAS]"
  fi
  # pip byte-compiles every file it installs in one process (about 27,000 here: a minute of one
  # core on the 2-core CI machine); installing with --no-compile and compiling once on every core
  # leaves the same .pyc files (confined children, whose site-packages is read-only, need them).
  say "==> byte-compiling the environment on every core"
  "$VPY" -m compileall -q -j 0 "$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
  "$VPY" -c 'import apex_core, torch, numpy, pydantic, fastmcp, mcp, typer' \
    || die "the environment in $VENV does not import; see the pip output above"
  echo "$STAMP" > "$STAMP_FILE"
fi

# --- optional downloads ------------------------------------------------------------------------
if [ "$SKIP_DOWNLOADS" = 1 ]; then
  say "==> skipping optional downloads (--skip-downloads)"
else
  say "==> optional downloads: the public AMD PDFs of docs_index/manifest.toml and the ROCm source trees of apex_core/sources/checkouts.toml"
fi

# --- source checkouts ----------------------------------------------------------------------------
# Shallow, sparse clones of the public ROCm repositories in apex_core/sources/checkouts.toml (aiter's
# kernels, rocm-examples, ck_tile examples, ROCm Triton tutorials) into third_party/sources/<name>
# (git-ignored), which the source index reads as checkout:<name>. A missing network or git is
# reported and skipped, never fatal; --skip-downloads skips them; a checkout already there is kept.
if [ "$SKIP_DOWNLOADS" = 1 ]; then
  say "==> source checkouts: skipped (--skip-downloads)"
else
  say "==> source checkouts (apex_core/sources/checkouts.toml -> third_party/sources/)"
  if [ "$QUIET" = 1 ]; then
    "$VPY" -m apex_core.sources.checkouts >/dev/null || say "    (source checkouts were not fetched; run: .venv/bin/python -m apex_core.sources.checkouts)"
  else
    "$VPY" -m apex_core.sources.checkouts || say "    (source checkouts were not fetched; run: .venv/bin/python -m apex_core.sources.checkouts)"
  fi
fi

# --- documentation index -------------------------------------------------------------------------
# Fetches the manifest's PDFs into docs_index/pdfs/ unless --skip-downloads (a missing network is
# reported, never fatal), then indexes the skills, docs, hardware facts, kernel docstrings and PDFs
# into docs_index/index/ (incremental: seconds when nothing changed). A failure here is reported
# and set-up goes on: `apex docs index` builds it later, and a first search builds it too.
DOCS_ARGS=(--fetch)
if [ "$SKIP_DOWNLOADS" = 1 ]; then DOCS_ARGS=(--skip-downloads); fi
say "==> documentation index (apex docs)"
if [ "$QUIET" = 1 ]; then
  "$VPY" "$ROOT/docs_index/build.py" "${DOCS_ARGS[@]}" >/dev/null || say "    (the documentation index was not built; run: .venv/bin/apex docs index)"
else
  "$VPY" "$ROOT/docs_index/build.py" "${DOCS_ARGS[@]}" || say "    (the documentation index was not built; run: .venv/bin/apex docs index)"
fi

# --- source index --------------------------------------------------------------------------------
# The kernels of the installed stack and the checkouts (apex source, the identifier): a first build
# reads every file of torch and transformers (half a minute on a small machine), so it is done here
# rather than in an agent's first tool call; later runs rescan only what changed.
say "==> source index (apex source index)"
if [ "$QUIET" = 1 ]; then
  "$VPY" -m apex_core.cli.main source index >/dev/null || say "    (the source index was not built; run: .venv/bin/apex source index)"
else
  "$VPY" -m apex_core.cli.main source index || say "    (the source index was not built; run: .venv/bin/apex source index)"
fi

# --- agent CLIs ----------------------------------------------------------------------------------
# Project scope: the committed .mcp.json, .cursor/mcp.json, .codex/config.toml and skill links,
# checked (and rewritten if they drifted) from the server registry; `apex mcp install --scope user`
# registers the servers for every folder instead.
for cli in "${CLI_LIST[@]}"; do
  case "$cli" in
    none) ;;
    *)
      say "==> wiring $cli"
      if [ "$QUIET" = 1 ]; then
        "$VENV/bin/apex" mcp install --client "$cli" --project-dir "$ROOT" >/dev/null
      else
        "$VENV/bin/apex" mcp install --client "$cli" --project-dir "$ROOT"
      fi
      case "$cli" in
        claude) command -v claude >/dev/null 2>&1 || say "    (claude is not on PATH: npm install -g @anthropic-ai/claude-code)" ;;
        codex) command -v codex >/dev/null 2>&1 || say "    (codex is not on PATH: npm install -g @openai/codex)" ;;
        cursor) say "    (open this folder in Cursor; it reads .cursor/mcp.json and .agents/skills)" ;;
      esac
      ;;
  esac
done

say "==> ready: source $VENV/bin/activate, then try 'apex run --workload cpu-mini' (the whole pipeline on this CPU) or 'apex tasks list'"
