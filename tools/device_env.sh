# Source on the GPU machine after tools/device_setup.sh: the grader's Python
# (the machine's torch venv) with the DSLs unpacked beside it.
DSL_SITE=${DSL_SITE:-/root/dsl-site}
export MKB_PYTHON=${MKB_PYTHON:-/opt/torch/.venv/bin/python}
export PYTHONPATH="$DSL_SITE${PYTHONPATH:+:$PYTHONPATH}"
export CUTE_DSL_CACHE_DIR=${CUTE_DSL_CACHE_DIR:-/root/cute-cache}
export PYTHONUNBUFFERED=1
