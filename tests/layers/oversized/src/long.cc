a
b
c
d
