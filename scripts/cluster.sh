#!/usr/bin/env bash
# A local N-node RabbitMQ cluster (rabbit-1@localhost … on ports 5701 …): `scripts/cluster.sh start 3`.
# The script, and with it the cluster's layout, lives in the package (rbench/faults/cluster.sh) so that
# the fault executor of a pip-installed rbench finds it too; this is the checkout's way in. docs/faults.md
exec bash "$(dirname "$(readlink -f "$0")")/../rbench/faults/cluster.sh" "$@"
