#!/usr/bin/python3
"""Renders every chat template in chat_templates/*.jinja on every conversation in
chat_conversations.json with a real Jinja engine (Debian's python3-jinja2), configured as
Hugging Face transformers renders chat templates (sandboxed, trim_blocks, lstrip_blocks,
raise_exception), and writes chat_templates/<family>.golden.json.

The goldens are committed; the C++ renderer (src/engine/chat_template.cpp) is tested against
them by tests/server/test_chat_template.cpp. Re-run only when a template or conversation is
added:  /usr/bin/python3 tests/server/data/make_chat_goldens.py
"""
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))

# The special-token texts of each family's models, passed as bos_token / eos_token.
FAMILIES = {
    "chatml": {"source": "teknium/OpenHermes-2.5-Mistral-7B", "bos": "<s>", "eos": "<|im_end|>"},
    "llama2": {"source": "meta-llama/Llama-2-7b-chat-hf", "bos": "<s>", "eos": "</s>"},
    "llama3": {"source": "meta-llama/Meta-Llama-3-8B-Instruct", "bos": "<|begin_of_text|>", "eos": "<|eot_id|>"},
    "mistral": {"source": "mistralai/Mistral-7B-Instruct-v0.2", "bos": "<s>", "eos": "</s>"},
    "gemma": {"source": "google/gemma-2-9b-it", "bos": "<bos>", "eos": "<eos>"},
    "phi3": {"source": "microsoft/Phi-3.5-mini-instruct", "bos": "<s>", "eos": "<|endoftext|>"},
    "zephyr": {"source": "HuggingFaceH4/zephyr-7b-beta", "bos": "<s>", "eos": "</s>"},
}


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    with open(os.path.join(HERE, "chat_conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    for family, info in FAMILIES.items():
        path = os.path.join(HERE, "chat_templates", family + ".jinja")
        with open(path, encoding="utf-8") as f:
            source = f.read()
        template = env.from_string(source)
        cases = []
        for name, messages in conversations.items():
            for add_generation_prompt in (True, False):
                case = {"conversation": name, "add_generation_prompt": add_generation_prompt}
                try:
                    case["output"] = template.render(messages=messages, bos_token=info["bos"],
                                                     eos_token=info["eos"],
                                                     add_generation_prompt=add_generation_prompt)
                except TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
        golden = {"family": family, "source": info["source"], "bos_token": info["bos"],
                  "eos_token": info["eos"], "jinja2_version": jinja2.__version__, "cases": cases}
        out = os.path.join(HERE, "chat_templates", family + ".golden.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print("wrote", out, len(cases), "cases", file=sys.stderr)


if __name__ == "__main__":
    main()
