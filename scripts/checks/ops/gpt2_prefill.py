# GPT-2 prefill (Hugging Face GPT2LMHeadModel from GPT2Config(): random
# weights, bf16, batch 8 x 512 tokens) as a module script: kopt drives it.
import torch
from transformers import GPT2Config, GPT2LMHeadModel


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gpt2 = GPT2LMHeadModel(GPT2Config()).to(torch.bfloat16)

    def forward(self, input_ids):
        return self.gpt2(input_ids=input_ids).logits


def get_inputs():
    return [torch.randint(0, 50257, (8, 512))]
