// The Foundation-free rules and calendar types are part of JobKit's API.
@_exported import JobKitCore
