"""A Ray Serve deployment of an rlx-onnx model: each replica loads the model
(an `.rlx` artifact or an `.onnx` file) once, and answers requests in
batches (`@serve.batch`): the inputs of concurrent requests are stacked along
the batch axis, run as one, and the outputs split back.

    from serve_app import app
    handle = serve.run(app("model.rlx", replicas=2, provider="CUDAExecutionProvider", gpus=1))
    y = handle.remote({"x": x}).result()      # a dict of arrays, one request's rows

Every input and output of the model must have the batch as its first axis.
"""

import numpy as np
from ray import serve

import rlx_onnx


@serve.deployment
class RlxModel:
    def __init__(self, model, provider, max_batch_size, batch_wait_timeout_s):
        providers = [provider] if provider == "CPUExecutionProvider" else [provider, "CPUExecutionProvider"]
        self.session = rlx_onnx.InferenceSession(model, providers=providers)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.run_batch.set_max_batch_size(max_batch_size)
        self.run_batch.set_batch_wait_timeout_s(batch_wait_timeout_s)

    def providers(self):
        return self.session.get_providers()

    @serve.batch
    async def run_batch(self, requests):
        """`requests`: one dict of arrays per request (each its own rows)."""
        rows = [len(r[self.inputs[0]]) for r in requests]
        feed = {n: np.concatenate([r[n] for r in requests]) for n in self.inputs}
        outs = self.session.run(None, feed)
        bounds = np.cumsum([0] + rows)
        return [
            {name: out[a:b] for name, out in zip(self.outputs, outs)}
            for a, b in zip(bounds[:-1], bounds[1:])
        ]

    async def __call__(self, request):
        return await self.run_batch(request)


def app(model, replicas=1, provider="CPUExecutionProvider", gpus=0, cpus=1, max_batch_size=16, batch_wait_timeout_s=0.002):
    """The application: `replicas` replicas of `model`, each with `gpus` GPUs
    and `cpus` CPUs reserved (one GPU a replica: the CUDA provider's
    device_id 0 is the GPU Ray gives it)."""
    return RlxModel.options(
        num_replicas=replicas,
        ray_actor_options={"num_gpus": gpus, "num_cpus": cpus},
        max_ongoing_requests=4 * max_batch_size,
    ).bind(model, provider, max_batch_size, batch_wait_timeout_s)
