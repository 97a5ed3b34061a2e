# A large corpus from the shared corpora: their paragraphs (tinyshakespeare's speeches, Multi30k
# sentences in groups of 5, names in groups of 20), shuffled with a seed and repeated until the
# size is reached. Usage: make_corpus.py OUT BYTES
import random, sys
import os
d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data") + "/"
paras = [p for p in open(d + "tinyshakespeare.txt", encoding="utf-8").read().split("\n\n") if p.strip()]
for f in ("multi30k/train.en", "multi30k/train.de"):
    lines = open(d + f, encoding="utf-8").read().splitlines()
    paras += ["\n".join(lines[i:i + 5]) for i in range(0, len(lines), 5)]
names = open(d + "names.txt", encoding="utf-8").read().splitlines()
paras += ["\n".join(names[i:i + 20]) for i in range(0, len(names), 20)]
rng = random.Random(7)
want, out = int(sys.argv[2]), open(sys.argv[1], "w", encoding="utf-8")
n = 0
while n < want:
    rng.shuffle(paras)
    for p in paras:
        s = p + "\n\n"
        out.write(s)
        n += len(s.encode("utf-8"))
        if n >= want:
            break
out.close()
