"""The shape facet of the value model: the rank and the size of each dimension of the tensors a
model's forward computes, for the input the program feeds it.

- `dims`: a dimension is a known integer, a symbol (the batch size N, the H and W of an input the
  code never fixes) or arithmetic on symbols (what a convolution does to H);
- `contracts`: the shape contract of each layer, functional op and tensor method, as data;
- `inputs`: where shapes come from (datasets and their transforms, DataLoader batch sizes, tensor
  factories with literal sizes, `summary(model, (3, 32, 32))`);
- `modules`: a module class's layers, read from `__init__`, and its forward interpreted over shapes;
- `facts`: what rules ask, built lazily per file (`shape_facts(semantic)`): a file with no shape
  question pays nothing.
"""
