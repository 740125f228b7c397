// Storage account for the Functions host (AzureWebJobsStorage: timer singleton lease and schedule
// monitor) and the Flex Consumption deployment package container. Identity-only: shared keys are
// off, so nothing can use an account key here; the app identity gets Storage Blob Data Owner on
// this account only (it holds nothing else).
// Checked (search, Azure/bicep-types-az generated/storage 2023-05-01):
//   Microsoft.Storage/storageAccounts@2023-05-01 properties minimumTlsVersion ('TLS1_2'),
//   supportsHttpsTrafficOnly, allowBlobPublicAccess, allowSharedKeyAccess,
//   defaultToOAuthAuthentication, allowCrossTenantReplication, publicNetworkAccess, networkAcls;
//   blobServices/containers@2023-05-01; primaryEndpoints.blob (read-only).

import { builtInRoleIds } from 'roles.bicep'

@description('Storage account name (3-24 lowercase letters and digits, globally unique).')
@minLength(3)
@maxLength(24)
param name string

@description('Azure region.')
param location string

@description('Resource tags.')
param tags object = {}

@description('Blob container that holds the Flex Consumption deployment package.')
param deploymentContainerName string

@description('Principal (object) id of the function app identity.')
param appPrincipalId string

resource hostStorage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    allowCrossTenantReplication: false
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }

  resource blobService 'blobServices' = {
    name: 'default'

    resource deploymentContainer 'containers' = {
      name: deploymentContainerName
      properties: {
        publicAccess: 'None'
      }
    }
  }
}

resource hostBlobOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, appPrincipalId, builtInRoleIds.storageBlobDataOwner)
  scope: hostStorage
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.storageBlobDataOwner)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output name string = hostStorage.name
output deploymentContainerUrl string = '${hostStorage.properties.primaryEndpoints.blob}${deploymentContainerName}'
