// Optional Event Grid custom topic for queue events (CloudEvents 1.0), and the app identity's
// right to publish to it. Local (key) auth is off: the app sends with its managed identity.
// Checked (search, Azure/bicep-types-az and Azure docs' Bicep examples): Microsoft.EventGrid/topics
// @2025-02-15 properties inputSchema 'CloudEventSchemaV1_0', disableLocalAuth, publicNetworkAccess,
// minimumTlsVersionAllowed; read-only properties.endpoint.

import { builtInRoleIds } from 'roles.bicep'

@description('Topic name (3-50 letters, digits, hyphens).')
@minLength(3)
@maxLength(50)
param name string

param location string
param tags object = {}

@description('Principal id of the app identity that publishes events.')
param publisherPrincipalId string

resource topic 'Microsoft.EventGrid/topics@2025-02-15' = {
  name: name
  location: location
  tags: tags
  properties: {
    inputSchema: 'CloudEventSchemaV1_0'
    disableLocalAuth: true
    publicNetworkAccess: 'Enabled'
    minimumTlsVersionAllowed: '1.2'
  }
}

resource sender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(topic.id, publisherPrincipalId, builtInRoleIds.eventGridDataSender)
  scope: topic
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.eventGridDataSender)
    principalId: publisherPrincipalId
    principalType: 'ServicePrincipal'
  }
}

@description('QUEUE_EVENTGRID_ENDPOINT')
output endpoint string = topic.properties.endpoint
output name string = topic.name
