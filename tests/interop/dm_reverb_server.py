"""Runs a dm-reverb 0.14 server with table 'my_table' until killed.

/path/to/dm-venv/bin/python tests/interop/dm_reverb_server.py PORT
"""

import sys
import time

import reverb

server = reverb.Server(
  tables=[
    reverb.Table(
      'my_table',
      reverb.selectors.Uniform(),
      reverb.selectors.Fifo(),
      1000,
      reverb.rate_limiters.MinSize(1),
    )
  ],
  port=int(sys.argv[1]),
)
print('serving', flush=True)
while True:
  time.sleep(1)
