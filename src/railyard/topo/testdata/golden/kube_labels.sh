kubectl label node n0 railyard.io/block=block0 railyard.io/spine=spine0 railyard.io/rack-group-615ec7812ce3=leaf0 cluster.railyard.io/name=train-a --overwrite
kubectl label node n1 railyard.io/block=block0 railyard.io/spine=spine0 railyard.io/rack-group-615ec7812ce3=leaf0 cluster.railyard.io/name=train-a --overwrite
kubectl label node 'weird node$' railyard.io/block=block0 railyard.io/spine=spine0 railyard.io/rack-group-615ec7812ce3=Leaf-1-row-B-0a5ca1afe871 cluster.railyard.io/name=train-a --overwrite
