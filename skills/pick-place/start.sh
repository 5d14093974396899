#!/usr/bin/env bash
# Start hook of the pick-place skill: runs before Dora starts the profile's dataflow.
# Arguments: NAME VERSION; environment: PAOS_SKILL_NAME, PAOS_SKILL_VERSION,
# PAOS_SKILL_PROFILE, PAOS_SKILL_ROOT. A non-zero exit aborts the start cleanly.
set -euo pipefail
echo "pick-place $2: starting profile ${PAOS_SKILL_PROFILE} from ${PAOS_SKILL_ROOT}"
test -f "${PAOS_SKILL_ROOT}/profiles/${PAOS_SKILL_PROFILE}/dataflow.yml"
if [ "${PAOS_SKILL_PROFILE}" = "sim" ]; then
  # The simulated cell renders headless; fail early when MuJoCo cannot be imported.
  python -c "import mujoco" >/dev/null
fi
