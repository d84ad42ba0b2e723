"""Receive (S5): one attempt on a set of partitions, decided on the driver or by Spark;
range locks; the lease over partitions."""
