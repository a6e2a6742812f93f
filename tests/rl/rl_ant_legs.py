"""Ant's legs relabelled in the simulator's own coordinates, read off the MuJoCo model (not the preset): the
symmetry the ``torso="turned"`` features are checked against (tests/rl/test_presets.py, tests/rl/test_sac.py)."""

import numpy as np


def _quaternion_product(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def ant_relabelling(env):
    """Relabel Ant's leg k as leg k+1, read off the model (not the preset): leg k+1's hip sits 90 degrees on from leg
    k's about z, so the same ant is described with its body frame turned by -90 degrees; each joint keeps its angle
    up to the sign that turning leg k's axis onto leg k+1's gives. Returns functions of (qpos, qvel) and of an
    action in the actuators' order."""
    m = env.unwrapped.model
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # +90 degrees about z
    joint = {m.joint(j).name: j for j in range(m.njnt)}
    hips = [joint[f"hip_{k}"] for k in range(1, 5)]
    ankles = [joint[f"ankle_{k}"] for k in range(1, 5)]
    for k in range(4):  # the legs' bodies sit a quarter turn apart, counter-clockwise
        here, there = m.body_pos[m.jnt_bodyid[hips[k]]], m.body_pos[m.jnt_bodyid[hips[(k + 1) % 4]]]
        assert np.allclose(turn @ here, there) and not np.allclose(here, 0)
    pairs = [(hips[k], hips[(k + 1) % 4]) for k in range(4)] + [(ankles[k], ankles[(k + 1) % 4]) for k in range(4)]
    signs = {new: float(np.sign(np.dot(turn @ m.jnt_axis[old], m.jnt_axis[new]))) for old, new in pairs}
    assert set(signs.values()) == {1.0, -1.0}  # two ankles flip: the hips' axes are z, the ankles' alternate
    r = np.array([np.cos(-np.pi / 4), 0.0, 0.0, np.sin(-np.pi / 4)])  # -90 degrees about z, as a quaternion

    def state(qpos, qvel):
        q, v = qpos.copy(), qvel.copy()
        q[3:7] = _quaternion_product(qpos[3:7], r)
        v[3:6] = turn @ qvel[3:6]  # the body-frame angular velocity in the turned frame
        for old, new in pairs:
            q[m.jnt_qposadr[new]] = signs[new] * qpos[m.jnt_qposadr[old]]
            v[m.jnt_dofadr[new]] = signs[new] * qvel[m.jnt_dofadr[old]]
        return q, v

    def action(a):
        actuated = [int(m.actuator_trnid[i, 0]) for i in range(m.nu)]
        out = np.empty_like(a)
        for old, new in pairs:
            out[actuated.index(new)] = signs[new] * a[actuated.index(old)]
        return out

    return state, action

