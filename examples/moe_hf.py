"""A Hugging Face transformers Qwen2-MoE model on MegaMoE: the program README.md's Hugging Face
snippet comes from (tests/python/test_doc_examples.py runs it with the command below).

    python -m hyper_parallel.core.multicore.shmem.launch --nproc 2 examples/moe_hf.py

A tiny Qwen2-MoE made from its config (nothing is downloaded), the same on every PE; its sparse
MoE blocks are swapped for MegaMoE layers, expert parallel over the PEs. The loss and the aux
loss are the unmodified model's, and the state dict the layers give back loads into a fresh
model. Needs transformers 5.x (scripts/setup_deps.sh installs it); without it every PE exits
with 77, which the launcher passes on ("this machine cannot run it").
"""

import copy
import sys

import torch
import torch.distributed as dist

try:
    import transformers
except ImportError:
    sys.exit(77)
if int(transformers.__version__.split(".")[0]) < 5:
    sys.exit(77)

from hyper_parallel.core.multicore.mega_moe import hf

dist.init_process_group("gloo")  # the launcher's (or torchrun's) environment
rank = dist.get_rank()
config = transformers.Qwen2MoeConfig(
    vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    num_key_value_heads=1, intermediate_size=32, moe_intermediate_size=24,
    shared_expert_intermediate_size=8, num_experts=4, num_experts_per_tok=2,
    router_aux_loss_coef=0.01)
torch.manual_seed(0)  # the same weights on every PE
model = transformers.Qwen2MoeForCausalLM(config).eval()
original = copy.deepcopy(model)
ids = torch.randint(0, config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(rank))

layers = hf.replace_moe_blocks(model)      # every sparse MoE block, in place; the new layers
out = model(ids, labels=ids, output_router_logits=True)   # loss and aux_loss as before
state = hf.to_hf_state_dict(model)         # collective: a state dict the original model loads
hf.close(layers)                           # collective: their buffers

expected = original(ids, labels=ids, output_router_logits=True)
for name in ("loss", "aux_loss"):
    assert torch.allclose(getattr(out, name), getattr(expected, name), rtol=1e-5, atol=1e-6), name
fresh = transformers.Qwen2MoeForCausalLM(config)
fresh.load_state_dict(state)  # strict: every key of the original model, no other
assert all(torch.equal(fresh.state_dict()[k], v) for k, v in original.state_dict().items())
print(f"PE {rank}: loss {out.loss.item():.4f} and aux_loss {out.aux_loss.item():.4f}, "
      f"as the unmodified model's", flush=True)
dist.destroy_process_group()
