"""dualbench in congestlab: the `congestlab bench` commands, the ANMA study (seed 004),
and the reader of dualbench's JSON reports."""
