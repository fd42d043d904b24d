"""Writes or restores a checkpoint of checkpoint_tables' tables with whichever
Reverb is importable as `reverb` (dm-reverb 0.14 in its venv), and dumps
what the tables then hold as JSON.

  python tests/interop/dm_reverb_checkpoint.py write DIR STATE.json
      fills the tables, checkpoints them into DIR (DefaultCheckpointer),
      dumps the state they were checkpointed in
  python tests/interop/dm_reverb_checkpoint.py restore DIR STATE.json
      restores the latest checkpoint in DIR and dumps the restored state
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import reverb  # pylint: disable=g-import-not-at-top,wrong-import-position

import checkpoint_tables  # pylint: disable=g-import-not-at-top,wrong-import-position


def main(mode: str, directory: str, state_path: str) -> None:
  tables = checkpoint_tables.tables(reverb)
  names = [table.name for table in tables]
  server = reverb.Server(
    tables,
    port=None,
    checkpointer=reverb.checkpointers.DefaultCheckpointer(path=directory),
  )
  client = reverb.Client(f'localhost:{server.port}')
  if mode == 'write':
    checkpoint_tables.fill(client, names)
    print('checkpoint', client.checkpoint(), flush=True)
  state = checkpoint_tables.dump(client, names)
  with open(state_path, 'w') as f:
    json.dump(state, f, indent=1, sort_keys=True)
  server.stop()


if __name__ == '__main__':
  main(*sys.argv[1:4])
