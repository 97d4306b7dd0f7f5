"""MegaMoE training, EP x DP over teams and under DDP, the program README.md's MegaMoE
snippets come from (tests/python/test_doc_examples.py runs it with the command below).

    python -m hyper_parallel.core.multicore.shmem.launch --nproc 2 examples/moe_training.py

Any even number of PEs: EP groups of 2, DP groups of world / 2 (on 2 PEs EP is the world and
there is no DP; --nproc 4 runs EP 2 x DP 2). Every PE builds the small decoder of
mega_moe.model (2 layers of 4 experts, synthetic tokens), takes one step with
reduce_gradients, then one under DDP(prepare_ddp(...)) with clip_grad_norm_, saves a
checkpoint and prints its losses.
"""

import math
import shutil
import tempfile

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from hyper_parallel.core.multicore.mega_moe import MegaMoE, expert_data_parallel_groups
from hyper_parallel.core.multicore.mega_moe import clip_grad_norm_, prepare_ddp
from hyper_parallel.core.multicore.mega_moe.model import MoEDecoder, reduce_gradients
from hyper_parallel.core.multicore.mega_moe.model import lm_loss, make_optimizer, save_checkpoint
from hyper_parallel.core.multicore.mega_moe.model import DecoderConfig, synthetic_tokens

dist.init_process_group("gloo")  # the launcher's (or torchrun's) environment
rank = dist.get_rank()
config = DecoderConfig()
hidden, inter = config.hidden_size, config.intermediate_size
experts, top_k = config.num_experts, config.top_k
tokens = synthetic_tokens(config, rank, 0)  # this PE's batch

ep, dp = expert_data_parallel_groups(2)    # 4 PEs: EP groups [0, 1], [2, 3]; DP [0, 2], [1, 3]
layer = MegaMoE(hidden, inter, experts, top_k, group=ep)  # experts split over the EP group
layer(torch.randn(8, hidden)).sum().backward()  # one call: collective over the EP group
layer.close()                                   # collective: its buffers

model = MoEDecoder(config, "shmem", group=ep, dp_group=dp)   # the decoder, EP 2 x DP 2
loss = lm_loss(model(tokens), tokens)
loss.backward(); reduce_gradients(model)   # dense grads averaged over the WORLD; expert grads
                                           # summed over DP and / world (the same scale)
model.zero_grad()

# A directory every PE writes its part of the checkpoint to: rank 0's, sent to the others.
where = [tempfile.mkdtemp(prefix="moe-example-") if rank == 0 else None]
dist.broadcast_object_list(where, src=0)
path = where[0]

ddp = DDP(prepare_ddp(model, dp_group=dp))  # DDP leaves the experts alone (summed over dp)
optimizer = make_optimizer(model)           # a whole step: mega_moe.model.ddp_train_step
lm_loss(ddp(tokens), tokens).backward(); clip_grad_norm_(model.parameters(), 1.0)  # global norm
optimizer.step(); save_checkpoint(model, optimizer, path)  # DCP; load_checkpoint at any EP size

with torch.no_grad():
    after = lm_loss(model(tokens), tokens)
assert math.isfinite(loss.item()) and math.isfinite(after.item()), (loss, after)
print(f"PE {rank}: loss {loss.item():.4f}, after one step {after.item():.4f}", flush=True)
model.close()  # collective: the decoder's SHMEM buffers
dist.barrier()
if rank == 0:
    shutil.rmtree(path, ignore_errors=True)
dist.destroy_process_group()
