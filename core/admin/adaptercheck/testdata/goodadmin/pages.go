package goodadmin

const scopeListThings = "berth.admin.v1.ThingService/ListThings"
