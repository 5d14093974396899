"""Bridges between doraforge's robot-adapter contract and third-party Dora robot nodes.

A bridge is a plain Dora node that speaks the contract (:mod:`doraforge.nodes.robot.contract`)
on one side and a robot node's own topics and units on the other, so that node runs
unchanged behind doraforge's arm and gripper tools. One module per robot family.
"""
