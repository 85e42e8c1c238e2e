# A BERT-base encoder (Hugging Face BertModel from BertConfig(): random
# weights, fp32, batch 32 x 128 tokens) as a module script for
# `kopt optimize --budget` (#37).
import torch
from transformers import BertConfig, BertModel


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bert = BertModel(BertConfig())

    def forward(self, input_ids):
        return self.bert(input_ids=input_ids).last_hidden_state


def get_inputs():
    return [torch.randint(0, 30522, (32, 128))]
