// Storage account for the queue's data: tables (tasks, runs, artifacts, clients...), storage
// queues (pending hints, trigger messages) and blobs (artifact bytes). The app reaches it with an
// account-key connection string (kept in Key Vault) because it signs shared-key SAS URLs for
// workers (pollTaskUrls, artifact downloads), so shared-key access must stay enabled here.
// Tables, queues and containers are created by the app itself (names carry QUEUE_STORAGE_PREFIX).
// Checked (search, Azure/bicep-types-az generated/storage 2023-05-01): storageAccounts properties
//   as in host-storage.bicep; blobServices properties.cors.corsRules; primaryEndpoints.queue.

@description('Storage account name (3-24 lowercase letters and digits, globally unique).')
@minLength(3)
@maxLength(24)
param name string

@description('Azure region.')
param location string

@description('Resource tags.')
param tags object = {}

@description('Replication SKU. Zone- or geo-redundant SKUs cost more per transaction.')
@allowed([
  'Standard_LRS'
  'Standard_ZRS'
  'Standard_GRS'
  'Standard_GZRS'
  'Standard_RAGRS'
  'Standard_RAGZRS'
])
param skuName string = 'Standard_LRS'

@description('Browser origins (the dashboard) allowed to fetch artifact blobs after the queue redirects to a SAS URL.')
param corsAllowedOrigins array = []

resource dataStorage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: skuName
  }
  properties: {
    accessTier: 'Hot'
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    allowBlobPublicAccess: false
    // Required: the app signs service SAS with the account key, and uses the key connection string.
    allowSharedKeyAccess: true
    defaultToOAuthAuthentication: false
    allowCrossTenantReplication: false
    // Workers call the queue endpoint directly with SAS URLs, so it stays publicly reachable.
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }

  resource blobService 'blobServices' = {
    name: 'default'
    properties: {
      cors: {
        corsRules: empty(corsAllowedOrigins) ? [] : [
          {
            allowedOrigins: corsAllowedOrigins
            allowedMethods: [
              'GET'
              'HEAD'
              'OPTIONS'
            ]
            allowedHeaders: [
              '*'
            ]
            exposedHeaders: [
              '*'
            ]
            maxAgeInSeconds: 3600
          }
        ]
      }
    }
  }
}

var queueEndpoint = dataStorage.properties.primaryEndpoints.queue

output name string = dataStorage.name
@description('Queue endpoint without the trailing slash, e.g. https://<account>.queue.core.windows.net')
output queueEndpoint string = endsWith(queueEndpoint, '/') ? take(queueEndpoint, length(queueEndpoint) - 1) : queueEndpoint
