# A 1B-class Llama-style decoder (Hugging Face LlamaForCausalLM from a
# LlamaConfig: 16 layers, hidden 2048, MLP 5632, 32 heads with 8 KV heads,
# about 1.1B parameters, random weights, bf16, eager attention as an older
# checkpoint's config asks), prefill of 4 x 512 tokens, as a module script
# for the default `kopt optimize` run (#37: at most 120 s on an H100/H200).
import torch
from transformers import LlamaConfig, LlamaForCausalLM


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        cfg = LlamaConfig(
            hidden_size=2048, intermediate_size=5632, num_hidden_layers=16,
            num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
            max_position_embeddings=2048, attn_implementation="eager",
        )
        # Built on the GPU when there is one: a CPU init of 1.1B random
        # weights costs seconds in every process that builds it.
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        with torch.device(dev):
            self.llm = LlamaForCausalLM(cfg).to(torch.bfloat16)

    def forward(self, input_ids):
        return self.llm(input_ids=input_ids, use_cache=False).logits


def get_inputs():
    return [torch.randint(0, 32000, (4, 512))]
