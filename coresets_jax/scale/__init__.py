"""Beyond one device and beyond memory: the same coresets on sharded, merged and streamed data.

- `sharding`: `shard` places data (or V) on a device mesh split along N, after which `cj.project`,
  `cj.build` and `cj.coreset` run on every device (the mesh primitives themselves are in `core.mesh`);
- `distributed`: `merged_coreset`, independent coresets on C shards and their union (HC §4.3; LR §3.4);
- `streaming`: `stream_coreset`, merge-reduce over chunks for data larger than RAM (LR §3.4), with its tree's
  nodes and on-disk checkpoints in `stream_checkpoint`, over the chunked sources of `core.chunks` (which
  `cj.certify` reads too).
"""

from .distributed import merged_coreset
from .sharding import make_data_mesh, shard
from .streaming import stream_coreset

__all__ = ["make_data_mesh", "merged_coreset", "shard", "stream_coreset"]
