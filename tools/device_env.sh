# Source on the GPU machine after tools/device_setup.sh: the grader's Python
# (the machine's torch venv) with the DSLs unpacked beside it. The DSLs sit on
# PYTHONPATH, where .pth files are not read, so CuTe DSL's package folder
# (added by its .pth in a normal install) is named here too.
DSL_SITE=${DSL_SITE:-/root/dsl-site}
export MKB_PYTHON=${MKB_PYTHON:-/opt/torch/.venv/bin/python}
export PYTHONPATH="$DSL_SITE:$DSL_SITE/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}"
export CUTE_DSL_CACHE_DIR=${CUTE_DSL_CACHE_DIR:-/root/cute-cache}
export PYTHONUNBUFFERED=1
