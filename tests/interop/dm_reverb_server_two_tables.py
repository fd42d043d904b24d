"""Runs a dm-reverb 0.14 server with tables 'my_table', 'legacy', 'frames'.

/path/to/dm-venv/bin/python tests/interop/dm_reverb_server_two_tables.py PORT
"""

import sys
import time

import reverb


def table(name):
  return reverb.Table(
    name,
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    1000,
    reverb.rate_limiters.MinSize(1),
  )


server = reverb.Server(
  tables=[table('my_table'), table('legacy'), table('frames')],
  port=int(sys.argv[1]),
)
print('serving', flush=True)
while True:
  time.sleep(1)
