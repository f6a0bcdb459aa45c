"""Services of the workflows app that are not the engine itself: notifications, the health hook receiver,
and the few CMDB writes no cmdb service covers yet."""
