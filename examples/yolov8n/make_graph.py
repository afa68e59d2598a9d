#!/usr/bin/env python3
"""Writes yolov8n.json: a YOLOv8n-like backbone and neck as a kjit graph (docs/MODEL.md).

The same topology as Ultralytics' YOLOv8n at width 0.25 and depth 0.33: a 3x3 stride-2 stem,
stride-2 3x3 convs between stages, C2f blocks (1x1 conv split into two halves, bottlenecks of two
3x3 convs with a residual add, a concat of every branch, a 1x1 conv), SPPF (1x1 conv, three 5x5
max pools, a four-way concat, a 1x1 conv), and the top-down neck (upsample x2, concat with the
backbone's stage, C2f) down to stride 8. C2f's channel split becomes two 1x1 convs (the two
halves of the weight rows), since the graph has no split op. BatchNorm eps is YOLO's 1e-3.

  python3 make_graph.py [--input 320]  > yolov8n.json
"""
import json
import sys

size = int(sys.argv[sys.argv.index("--input") + 1]) if "--input" in sys.argv else 320
nodes = []


def conv(name, src, c_out, k=1, s=1):
    nodes.append({"name": name, "op": "conv2d_bn_silu", "inputs": [src],
                  "attrs": {"c_out": c_out, "kernel": k, "stride": s, "pad": k // 2, "bn_eps": 0.001}})
    return name


def c2f(name, src, c_out, n, shortcut):
    half = c_out // 2
    branches = [conv(f"{name}.cv1a", src, half), conv(f"{name}.cv1b", src, half)]
    for i in range(n):
        x = branches[-1]
        y = conv(f"{name}.m{i}.cv2", conv(f"{name}.m{i}.cv1", x, half, 3), half, 3)
        if shortcut:
            nodes.append({"name": f"{name}.m{i}.add", "op": "add", "inputs": [y, x]})
            y = f"{name}.m{i}.add"
        branches.append(y)
    nodes.append({"name": f"{name}.cat", "op": "concat", "inputs": branches})
    return conv(f"{name}.cv2", f"{name}.cat", c_out)


def sppf(name, src, c_out):
    x = conv(f"{name}.cv1", src, c_out // 2)
    pools = [x]
    for i in range(3):
        nodes.append({"name": f"{name}.pool{i}", "op": "maxpool2d", "inputs": [pools[-1]],
                      "attrs": {"kernel": 5, "stride": 1, "pad": 2}})
        pools.append(f"{name}.pool{i}")
    nodes.append({"name": f"{name}.cat", "op": "concat", "inputs": pools})
    return conv(f"{name}.cv2", f"{name}.cat", c_out)


def upsample(name, src):
    nodes.append({"name": name, "op": "upsample_nearest2d", "inputs": [src], "attrs": {"scale": 2}})
    return name


# Backbone (YOLOv8n: channels 16, 32, 64, 128, 256; C2f depths 1, 2, 2, 1).
x = conv("b0.stem", "images", 16, 3, 2)
x = conv("b1.down", x, 32, 3, 2)
x = c2f("b2.c2f", x, 32, 1, True)
x = conv("b3.down", x, 64, 3, 2)
p3 = c2f("b4.c2f", x, 64, 2, True)
x = conv("b5.down", p3, 128, 3, 2)
p4 = c2f("b6.c2f", x, 128, 2, True)
x = conv("b7.down", p4, 256, 3, 2)
x = c2f("b8.c2f", x, 256, 1, True)
p5 = sppf("b9.sppf", x, 256)
# Neck, top down.
nodes.append({"name": "n10.cat", "op": "concat", "inputs": [upsample("n10.up", p5), p4]})
n12 = c2f("n12.c2f", "n10.cat", 128, 1, False)
nodes.append({"name": "n13.cat", "op": "concat", "inputs": [upsample("n13.up", n12), p3]})
n15 = c2f("n15.c2f", "n13.cat", 64, 1, False)

graph = {"name": f"yolov8n-like backbone + neck, {size}x{size}",
         "inputs": [{"name": "images", "shape": ["B", 3, size, size]}],
         "outputs": [n15, n12, p5],
         "nodes": nodes}
json.dump(graph, sys.stdout, indent=1)
print()
