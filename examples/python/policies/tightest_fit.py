"""The tightest node that fits: a placement policy written in Python.

A job goes whole onto the node with the fewest free GPUs that can still
take it, keeping large free blocks for large jobs (best fit). A job that no
node can take whole is spread over as few nodes as it can be: the roomiest
first.
"""

import tessel


class TightestFit:
    def time_sensitive(self):
        return False

    def place(self, view, job, want):
        cluster = view.cluster()
        room = {node.id: cluster.fits_on(node.id, want) for node in cluster.nodes()}
        fitting = [node for node, free in room.items() if free >= want.gpus]
        if fitting:
            best = min(fitting, key=lambda node: room[node])  # the first among ties
            return tessel.PlacementChoice(
                cluster.take(best, want, want.gpus),
                f"node {cluster.node(best).spec.name} has {room[best]} GPUs that fit it, the fewest of any node that fits it")
        gpus = []
        for node in sorted((node for node, free in room.items() if free > 0), key=lambda node: -room[node]):
            gpus += cluster.take(node, want, min(room[node], want.gpus - len(gpus)))
            if len(gpus) == want.gpus:
                return tessel.PlacementChoice(gpus, f"no node fits all {want.gpus} GPUs; spread over the roomiest nodes")
        return tessel.PlacementChoice([], f"needs {want.gpus} GPUs; {len(gpus)} fit it")
