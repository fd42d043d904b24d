"""The agents of the main job (examples/dqn_cartpole.py), one per framework.

``common`` holds what every process shares (table names, signatures, the
weights format); ``agent_tf``, ``agent_torch`` and ``agent_jax`` hold each
framework's Q-network, actor and learner; ``writer_actor`` is the actor loop
of the PyTorch and JAX agents (inserts through the TrajectoryWriter). Only
``agent_tf`` imports TensorFlow.
"""
